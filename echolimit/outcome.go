package echolimit

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/httplimit"
)

// outcomeStatus is the outcome of a response for counting by outcome
// (httplimit.WithOutcome): the status written; for an error the handler
// returned without writing, the status echo's error handler will send
// (an *echo.HTTPError's code, else 500); httplimit.OutcomeUnwritten when
// the handler returned nil without writing anything.
func outcomeStatus(c echo.Context, err error) int {
	resp := c.Response()
	if resp.Committed {
		return resp.Status
	}
	if err == nil {
		return httplimit.OutcomeUnwritten
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return http.StatusInternalServerError
}

// serveCounted runs next and settles the request's outcome
// (outcomeStatus, or httplimit.OutcomePanic when next panicked: the
// panic goes on unchanged to a recovery middleware outside this one).
func serveCounted(e *httplimit.Engine, res *httplimit.Result, next echo.HandlerFunc, c echo.Context) error {
	done := false
	defer func() {
		if !done {
			e.Outcome(c.Request().Context(), res, httplimit.OutcomePanic)
		}
	}()
	err := next(c)
	done = true
	e.Outcome(c.Request().Context(), res, outcomeStatus(c, err))
	return err
}
