// Command fiber3 serves the example API on fiber v3, limited by a rules
// file (default: the design notes' endpoint table) through the
// fiber3limit adapter: _examples/fiber on fiber's next major version.
//
//	go run ./_examples/fiber3 -addr :8080
//
// Flags and environment as in _examples/nethttp: -addr, -redis, -rules,
// -trusted-proxies, -jwt-secret (LIMITKIT_JWT_SECRET), -allow-degraded,
// -sync, -fleet-size, -watch, -admin-token, LIMITKIT_API_KEYS. Metrics
// are at /metrics. SIGHUP reloads the -rules file (and -watch 2s when it
// changes).
package main

import (
	"errors"
	"flag"
	"log"
	"os"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/adaptor"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/fiber3limit"
	"github.com/limitkit/limitkit/rules/serve"
)

// view is the keyfuncs.Request view of a fiber context that the rules
// server picks a request's rule by (and the example's replies name the
// caller by).
type view struct{ c fiber.Ctx }

func (v view) Method() string { return v.c.Method() }
func (v view) Route() string  { return v.c.Route().Path }
func (v view) Path() string   { return v.c.Path() }
func (v view) Header(name string) string {
	return v.c.Get(name)
}
func (v view) HeaderValues(name string) []string {
	var out []string
	for _, b := range v.c.Request().Header.PeekAll(name) {
		out = append(out, string(b))
	}
	return out
}
func (v view) Query(name string) string { return v.c.Query(name) }
func (v view) RemoteAddr() string       { return v.c.RequestCtx().RemoteAddr().String() }
func (v view) Value(key any) any        { return v.c.Context().Value(key) }

func main() {
	app, ln, err := exampleapp.Start("fiber3", os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	// One fiber3limit middleware per rule (package rules/serve), rebuilt
	// when the rules reload; srv picks the request's in the rules snapshot
	// it acquired.
	srv, err := serve.New(app.ServeConfig(), app.Rules, fiber3limit.NewMiddleware)
	if err != nil {
		log.Fatal(err)
	}
	defer app.StartReloads(srv.Live())() // SIGHUP, and -watch
	f := newFiber(app, srv)
	app.LogStartup("fiber3", ln)
	log.Fatal(f.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}))
}

// newFiber is the example API on fiber v3, each request limited by its
// rule of srv.
func newFiber(app *exampleapp.App, srv *serve.Server[fiber.Handler]) *fiber.App {
	// dispatch is the first handler of each route (not app.Use), so that
	// c.Route() is the matched route the rules are picked by.
	dispatch := func(c fiber.Ctx) error {
		if app.OTel != nil { // -otel: a server span per request, on which its decision shows
			ctx, end := app.StartSpan(c.Context(), c.Method(), c.Route().Path, func(k string) string { return c.Get(k) })
			defer end()
			c.SetContext(ctx)
		}
		snap := srv.Live().Acquire()
		defer snap.Release()
		if mw, ok := srv.Middleware(snap, view{c}, c.Route().Path); ok {
			return mw(c)
		}
		return c.Next()
	}
	reply := func(endpoint string) fiber.Handler {
		return func(c fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(exampleapp.Reply(endpoint, app.Caller(view{c})))
		}
	}
	f := fiber.New()
	f.Get(exampleapp.MetricsPath, adaptor.HTTPHandler(app.MetricsHandler())) // no dispatch: not limited
	// -admin-token: the operators' surface, no dispatch: not limited
	if admin := exampleapp.Admin(app, srv); admin != nil {
		f.All(serve.AdminPath+"*", adaptor.HTTPHandler(admin))
	}
	f.Get("/api1", dispatch, reply("GET /api1"))
	f.Get("/api2", dispatch, reply("GET /api2"))
	f.Post("/api2", dispatch, reply("POST /api2"))
	f.Get("/api3", dispatch, reply("GET /api3"))
	f.Get(exampleapp.PlansPath, dispatch, reply(exampleapp.PlansPattern))
	f.Get(exampleapp.ExportPath, dispatch, func(c fiber.Ctx) error {
		code, body := exampleapp.Export(c.Context(), c.Query("ms"))
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(code).Send(body)
	})
	f.Post(exampleapp.LoginPath, dispatch, func(c fiber.Ctx) error {
		// the username the login rule counted, never one parsed again
		// (c.FormValue reads the query string before the body)
		user, _ := fiber3limit.Identity(c)
		code, body := exampleapp.Login(user, c.FormValue("password"))
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(code).Send(body)
	})
	f.Get("/*", dispatch, reply("GET /")) // any other GET
	return f
}
