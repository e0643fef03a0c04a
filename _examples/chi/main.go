// Command chi serves a small API on go-chi/chi with one global limitkit
// middleware that keys each chi route pattern apart: 5 requests a minute
// per client IP on each route, so /users/1 and /users/2 share the
// "GET /users/{id}" quota and /items has its own.
//
//	go run ./_examples/chi -addr :8080
//	for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' localhost:8080/users/$i; done   # 200 ×5, 429
//	curl -i localhost:8080/items                                                                     # 200: its own quota
//
// chi routes after its middleware has run, so a global middleware does
// not see the route by itself (every route would share one quota);
// nethttp.WithRoute asks chi's Mux.Find for the pattern the request will
// match. The nethttp package does not import chi: the resolver is three
// lines here.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/nethttp"
)

// newRouter returns the example's router, limited on store.
func newRouter(store core.Store, opts ...core.Option) (http.Handler, error) {
	lim, err := core.NewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(5)}}, opts...)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	mw, err := nethttp.NewMiddleware(lim, nethttp.WithRoute(func(req *http.Request) string {
		// the route chi will match: "/users/{id}", or "" for none
		return r.Find(chi.NewRouteContext(), req.Method, req.URL.Path)
	}))
	if err != nil {
		return nil, err
	}
	r.Use(mw)
	r.Get("/users/{id}", func(w http.ResponseWriter, req *http.Request) {
		_, _ = w.Write([]byte(`{"user":"` + chi.URLParam(req, "id") + `"}` + "\n"))
	})
	r.Get("/items", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"items":[]}` + "\n"))
	})
	return r, nil
}

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	flag.Parse()
	store := memstore.MustNew()
	defer store.Close()
	h, err := newRouter(store)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("chi example listening on %s: 5 requests a minute per client on each route", *addr)
	log.Fatal(srv.ListenAndServe())
}
