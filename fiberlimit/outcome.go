package fiberlimit

import (
	"errors"

	"github.com/gofiber/fiber/v2"
)

// outcomeStatus is the status of a response for counting by outcome
// (httplimit.WithOutcome): for an error the handler returned, the status
// fiber's default error handler sends (a *fiber.Error's code, else 500);
// otherwise the response's status.
func outcomeStatus(c *fiber.Ctx, err error) int {
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) {
			return fe.Code
		}
		return fiber.StatusInternalServerError
	}
	return c.Response().StatusCode()
}
