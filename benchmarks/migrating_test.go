package benchmarks

// The "before" snippets of docs/migrating.md, compiled here because this
// module requires the peer libraries (the main module does not):
// go vet ./... in .ci/run compiles them, and internal/readme's
// TestMigratingSnippetsCompiled checks that every snippet of the guide
// marked "compiled in benchmarks/migrating_test.go" appears in this file
// verbatim (indentation aside). Each function is a program's set-up,
// never run.

import (
	"log"
	"net/http"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	sethhttp "github.com/sethvargo/go-limiter/httplimit"
)

var _ = []func(mux *http.ServeMux) http.Handler{migrateULule, migrateHTTPRate, migrateGoLimiter, migrateTollbooth}

func migrateULule(mux *http.ServeMux) http.Handler {
	rate, err := limiter.NewRateFromFormatted("1000-H")
	if err != nil {
		log.Fatal(err)
	}
	lim := limiter.New(memory.NewStore(), rate, limiter.WithTrustForwardHeader(true))
	handler := stdlib.NewMiddleware(lim).Handler(mux)
	return handler
}

func migrateHTTPRate(mux *http.ServeMux) http.Handler {
	handler := httprate.LimitByIP(100, time.Minute)(mux)
	return handler
}

func migrateGoLimiter(mux *http.ServeMux) http.Handler {
	store, err := memorystore.New(&memorystore.Config{Tokens: 15, Interval: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := sethhttp.NewMiddleware(store, sethhttp.IPKeyFunc("X-Forwarded-For"))
	if err != nil {
		log.Fatal(err)
	}
	handler := mw.Handle(mux)
	return handler
}

func migrateTollbooth(mux *http.ServeMux) http.Handler {
	lmt := tollbooth.NewLimiter(1, nil) // 1 request per second per IP
	handler := tollbooth.LimitHandler(lmt, mux)
	return handler
}
