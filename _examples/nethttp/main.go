// Command nethttp serves the example API on net/http, limited by a rules
// file (default: the design notes' endpoint table) through the nethttp
// adapter.
//
//	go run ./_examples/nethttp -addr :8080
//	curl -i localhost:8080/api1                                # anonymous: by IP
//	curl -i -H "Authorization: Bearer $TOKEN" localhost:8080/api1   # logged in
//
// Flags: -addr, -redis host:port or redis:// / rediss:// URL (empty:
// embedded store; two instances on one Redis share the quota; an
// unreachable Redis stops the start-up unless -allow-degraded), -rules
// file, -trusted-proxies CIDRs, -jwt-secret (or LIMITKIT_JWT_SECRET; when
// neither is set a random secret is generated and a sample token printed).
// LIMITKIT_API_KEYS lists valid X-API-Key values. Metrics are at /metrics;
// store failures are logged. -admin-token T serves the operators' surface:
// GET /admin/limits/login/alice with "Authorization: Bearer T" reads
// alice's failed logins, DELETE forgets them (not served without it).
//
// -otel stdout also exports to OpenTelemetry, printed to standard output
// as JSON lines: the otellimit metrics every 10 s (limitkit.decisions by
// limitkit.result, ...) and every request's server span, with its rule's
// limitkit.decision event (docs/observability.md):
//
//	go run ./_examples/nethttp -otel stdout | grep limitkit.decision
//
// The rules reload without a restart: kill -HUP <pid> reloads the -rules
// file, and -watch 2s also reloads it when its content changes. A file
// that does not validate is rejected with its problems logged, and the
// rules serving keep serving; rules whose name and limits did not change
// keep their state (docs/rules.md, "Rules that reload").
package main

import (
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/limitkit/limitkit/_examples/exampleapp"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Fatal(err) // after run's deferred calls: the store is closed
	}
}

func run() error {
	app, ln, err := exampleapp.Start("nethttp", os.Args[1:])
	if err != nil {
		return err
	}
	defer app.Close()
	// The example API behind serve.NewNetHTTP: a nethttp middleware per
	// rule, the request's picked in the rules snapshot it acquired.
	rs, h, err := app.HTTPHandler()
	if err != nil {
		return err
	}
	defer app.StartReloads(rs.Live())() // SIGHUP reloads -rules into rs; -watch also on change
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	app.LogStartup("nethttp", ln) // one line: the address, the store, the rules
	return srv.Serve(ln)
}
