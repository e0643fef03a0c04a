// Command echo serves the example API on echo, limited by a rules file
// (default: the design notes' endpoint table) through the echolimit
// adapter.
//
//	go run ./_examples/echo -addr :8080
//
// Flags and environment as in _examples/nethttp: -addr, -redis, -rules,
// -trusted-proxies, -jwt-secret (LIMITKIT_JWT_SECRET), -allow-degraded,
// -sync, -fleet-size, -watch, LIMITKIT_API_KEYS. Metrics are at /metrics.
// SIGHUP reloads the -rules file (and -watch 2s when it changes).
package main

import (
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/echolimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules/serve"
)

func main() {
	app, ln, err := exampleapp.Start("echo", os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	// One echolimit middleware per rule (package rules/serve), rebuilt when
	// the rules reload; srv picks the request's in the rules snapshot it
	// acquired.
	srv, err := serve.New(app.ServeConfig(), app.Rules, echolimit.NewMiddleware)
	if err != nil {
		log.Fatal(err)
	}
	defer app.StartReloads(srv.Live())() // SIGHUP, and -watch

	e := newEcho(app, srv)
	e.Listener = ln
	app.LogStartup("echo", ln)
	log.Fatal(e.Start(""))
}

// newEcho is the example API on echo, each request limited by its rule
// of srv.
func newEcho(app *exampleapp.App, srv *serve.Server[echo.MiddlewareFunc]) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true    // LogStartup says where
	if app.OTel != nil { // -otel: a server span per request, on which its decision shows
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				r := c.Request()
				ctx, end := app.StartSpan(r.Context(), r.Method, c.Path(), r.Header.Get)
				defer end()
				c.SetRequest(r.WithContext(ctx))
				return next(c)
			}
		})
	}
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Path() == exampleapp.MetricsPath || strings.HasPrefix(c.Path(), serve.AdminPath) {
				return next(c) // the scraper and operators are never limited
			}
			snap := srv.Live().Acquire()
			defer snap.Release()
			// c.Path is the matched route ("/api1", "/*").
			if mw, ok := srv.Middleware(snap, keyfuncs.FromHTTP(c.Request()), c.Path()); ok {
				return mw(next)(c)
			}
			return next(c)
		}
	})
	reply := func(endpoint string) echo.HandlerFunc {
		return func(c echo.Context) error {
			return c.Blob(http.StatusOK, "application/json", exampleapp.Reply(endpoint, app.Caller(keyfuncs.FromHTTP(c.Request()))))
		}
	}
	e.GET(exampleapp.MetricsPath, echo.WrapHandler(app.MetricsHandler()))
	if admin := exampleapp.Admin(app, srv); admin != nil { // -admin-token
		e.Any(serve.AdminPath+"*", echo.WrapHandler(admin))
	}
	e.GET("/api1", reply("GET /api1"))
	e.GET("/api2", reply("GET /api2"))
	e.POST("/api2", reply("POST /api2"))
	e.GET("/api3", reply("GET /api3"))
	e.GET(exampleapp.PlansPath, reply(exampleapp.PlansPattern))
	e.GET(exampleapp.ExportPath, echo.WrapHandler(exampleapp.ExportHandler()))
	e.POST(exampleapp.LoginPath, func(c echo.Context) error {
		// the username the login rule counted, never one parsed again
		// (c.FormValue would also read the query string)
		user, _ := echolimit.Identity(c)
		code, body := exampleapp.Login(user, c.FormValue("password"))
		return c.Blob(code, "application/json", body)
	})
	e.GET("/*", reply("GET /")) // any other GET

	e.Server.ReadHeaderTimeout = 5 * time.Second
	return e
}
