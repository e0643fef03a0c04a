package fiberlimit

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/limitkit/limitkit/httplimit"
)

// outcomeStatus is the outcome of a response for counting by outcome
// (httplimit.WithOutcome): for an error the handler returned, the status
// fiber's default error handler sends (a *fiber.Error's code, else 500);
// otherwise the response's status, or httplimit.OutcomeUnwritten when the
// handler left the response as fiber starts it (status 200, no body, no
// body stream): fasthttp keeps no trace of a status set to 200 by hand,
// so a bare c.Status(200) with no body reads as nothing written.
func outcomeStatus(c *fiber.Ctx, err error) int {
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) {
			return fe.Code
		}
		return fiber.StatusInternalServerError
	}
	resp := c.Response()
	status := resp.StatusCode()
	if status == fiber.StatusOK && len(resp.Body()) == 0 && !resp.IsBodyStream() {
		return httplimit.OutcomeUnwritten
	}
	return status
}

// serveCounted runs the rest of the chain and settles the request's
// outcome (outcomeStatus, or httplimit.OutcomePanic when it panicked: the
// panic goes on unchanged to a recovery middleware outside this one).
// The context is c.UserContext(): fasthttp tells a handler nothing of a
// client that went away, so only a user context the app set and that
// ended makes the request a cancelled one.
func (m *middleware) serveCounted(c *fiber.Ctx, res *httplimit.Result) error {
	done := false
	defer func() {
		if !done {
			m.e.Outcome(c.UserContext(), res, httplimit.OutcomePanic)
		}
	}()
	err := c.Next()
	done = true
	m.e.Outcome(c.UserContext(), res, outcomeStatus(c, err))
	return err
}
