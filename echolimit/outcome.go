package echolimit

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// outcomeStatus is the status of a response for counting by outcome
// (httplimit.WithOutcome): what was written, or, for an error the
// handler returned without writing, the status echo's error handler will
// send: an *echo.HTTPError's code, else 500.
func outcomeStatus(c echo.Context, err error) int {
	if resp := c.Response(); resp.Committed || err == nil {
		return resp.Status
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return http.StatusInternalServerError
}
