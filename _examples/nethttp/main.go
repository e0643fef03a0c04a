// Command nethttp serves the example API on net/http, limited by a rules
// file (default: the design notes' endpoint table) through the nethttp
// adapter.
//
//	go run ./_examples/nethttp -addr :8080
//	curl -i localhost:8080/api1                                # anonymous: by IP
//	curl -i -H "Authorization: Bearer $TOKEN" localhost:8080/api1   # logged in
//
// Flags: -addr, -redis host:port (empty: embedded store; two instances on
// one Redis share the quota), -rules file, -trusted-proxies CIDRs,
// -jwt-secret (or LIMITKIT_JWT_SECRET; when neither is set a random secret
// is generated and a sample token printed). LIMITKIT_API_KEYS lists valid
// X-API-Key values.
package main

import (
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/limitkit/limitkit/internal/exampleapp"
)

func main() {
	cfg, err := exampleapp.ParseFlags("nethttp", os.Args[1:], nil)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	app, err := exampleapp.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer app.Close()
	h, err := app.HTTPHandler()
	if err != nil {
		log.Fatal(err)
	}
	if app.SampleToken != "" {
		log.Printf("no -jwt-secret: generated one; a token for user alice:\n%s", app.SampleToken)
	}
	srv := &http.Server{Addr: cfg.Addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("nethttp example listening on %s (%d rules)", cfg.Addr, len(app.Rules.Rules()))
	log.Fatal(srv.ListenAndServe())
}
