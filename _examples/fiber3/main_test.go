package main

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3/middleware/adaptor"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/_examples/exampletest"
	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/rules/serve"
)

// TestRulesAndMetrics: the default rules limit the API and /metrics is
// never limited (exampletest.RulesAndMetrics).
// (Run it with go test ./_examples/fiber3; ./... does not reach _examples.)
func TestRulesAndMetrics(t *testing.T) {
	exampletest.RulesAndMetrics(t, newHandler)
}

// TestLoginSplit: one username guessed from 20 IPs in every encoding
// reaches the login handler's password check at most 10 times
// (exampletest.LoginSplit), the handler checking the username the login
// rule counted.
func TestLoginSplit(t *testing.T) {
	exampletest.LoginSplit(t, newHandler)
}

// newHandler is the example's API on the app's rules, as main serves it.
func newHandler(app *exampleapp.App) (http.Handler, error) {
	srv, err := serve.New(app.ServeConfig(), app.Rules, fiber3limit.NewMiddleware)
	if err != nil {
		return nil, err
	}
	return adaptor.FiberApp(newFiber(app, srv)), nil
}

// TestAdmin: with -admin-token the operators unblock a user
// (exampletest.AdminUnblocksLogin); without it nothing is served there.
func TestAdmin(t *testing.T) {
	exampletest.AdminUnblocksLogin(t, newHandler)
	exampletest.NoAdminWithoutToken(t, newHandler)
}
