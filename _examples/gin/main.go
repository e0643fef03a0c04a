// Command gin serves the example API on gin, limited by a rules file
// (default: the design notes' endpoint table) through the ginlimit adapter.
//
//	go run ./_examples/gin -addr :8080
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

	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/_examples/exampleapp"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules/serve"
)

func main() {
	app, ln, err := exampleapp.Start("gin", os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	// One ginlimit middleware per rule (package rules/serve), rebuilt when
	// the rules reload; srv picks the request's in the rules snapshot it
	// acquired.
	srv, err := serve.New(app.ServeConfig(), app.Rules, ginlimit.NewMiddleware)
	if err != nil {
		log.Fatal(err)
	}
	defer app.StartReloads(srv.Live())() // SIGHUP, and -watch

	hs := &http.Server{Handler: newRouter(app, srv), ReadHeaderTimeout: 5 * time.Second}
	app.LogStartup("gin", ln)
	log.Fatal(hs.Serve(ln))
}

// newRouter is the example API on gin, each request limited by its rule
// of srv.
func newRouter(app *exampleapp.App, srv *serve.Server[gin.HandlerFunc]) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	if app.OTel != nil { // -otel: a server span per request, on which its decision shows
		r.Use(func(c *gin.Context) {
			ctx, end := app.StartSpan(c.Request.Context(), c.Request.Method, c.FullPath(), c.Request.Header.Get)
			defer end()
			c.Request = c.Request.WithContext(ctx)
			c.Next()
		})
	}
	r.Use(func(c *gin.Context) {
		if c.FullPath() == exampleapp.MetricsPath || strings.HasPrefix(c.FullPath(), serve.AdminPath) {
			return // the scraper and operators are never limited
		}
		snap := srv.Live().Acquire()
		defer snap.Release()
		// FullPath is the matched route ("" for NoRoute: the path is used).
		if mw, ok := srv.Middleware(snap, keyfuncs.FromHTTP(c.Request), c.FullPath()); ok {
			mw(c)
		}
	})
	reply := func(endpoint string) gin.HandlerFunc {
		return func(c *gin.Context) {
			c.Data(http.StatusOK, "application/json", exampleapp.Reply(endpoint, app.Caller(keyfuncs.FromHTTP(c.Request))))
		}
	}
	r.GET(exampleapp.MetricsPath, gin.WrapH(app.MetricsHandler()))
	if admin := exampleapp.Admin(app, srv); admin != nil { // -admin-token
		r.Any(serve.AdminPath+"*identity", gin.WrapH(admin))
	}
	r.GET("/api1", reply("GET /api1"))
	r.GET("/api2", reply("GET /api2"))
	r.POST("/api2", reply("POST /api2"))
	r.GET("/api3", reply("GET /api3"))
	r.GET(exampleapp.PlansPath, reply(exampleapp.PlansPattern))
	r.GET(exampleapp.ExportPath, gin.WrapH(exampleapp.ExportHandler()))
	r.POST(exampleapp.LoginPath, func(c *gin.Context) {
		// the username the login rule counted, never one parsed again
		user, _ := ginlimit.Identity(c)
		code, body := exampleapp.Login(user, c.PostForm("password"))
		c.Data(code, "application/json", body)
	})
	r.NoRoute(func(c *gin.Context) { // any other GET
		if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
			c.Status(http.StatusNotFound)
			return
		}
		reply("GET /")(c)
	})
	return r
}
