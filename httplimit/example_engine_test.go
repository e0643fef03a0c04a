package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// view is the adapter's httplimit.Request: keyfuncs.FromHTTP's view, and
// whether the matched route accepts every method — a ServeMux pattern
// names its method or accepts them all, so the method is never part of
// the scope. (A framework's view answers from its router: gin's r.Any.)
type view struct{ keyfuncs.Request }

func (view) AnyMethod() bool { return true }

// An adapter in a dozen lines: an Engine per middleware, and per request
// a view of the request, a decision, the header fields, and the next
// handler or the denial. This one is for net/http; another framework
// changes only the view and how headers and the body are written.
func ExampleNewAdapterEngine() {
	store := memstore.MustNew()
	defer store.Close()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Algorithm: core.FixedWindow,
		Limits: []core.Limit{core.PerMinute(1)}}, core.WithClock(clk))

	e, err := httplimit.NewAdapterEngine(httplimit.Adapter{Name: "myadapter"}, l, httplimit.WithResetDelta())
	if err != nil {
		panic(err)
	}
	middleware := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var res httplimit.Result
			e.Decide(r.Context(), view{keyfuncs.FromHTTP(r)}, nil, &res)
			if res.Action != httplimit.Skip {
				e.SetHTTP(&res, w.Header())
			}
			if res.Action != httplimit.Deny {
				next.ServeHTTP(w, r)
				return
			}
			rej := e.Reject(&res)
			w.Header().Set("Content-Type", rej.ContentType)
			w.WriteHeader(rej.Status)
			w.Write(rej.Body)
		})
	}
	h := middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := 0; i < 2; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d remaining=%s reset=%s retry-after=%q\n", w.Code,
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset"), w.Header().Get("Retry-After"))
	}

	// another adapter's option is refused where it is written
	_, err = httplimit.NewAdapterEngine(httplimit.Adapter{Name: "myadapter"}, l, nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, httplimit.Rejection) {}))
	fmt.Println(err)
	// Output:
	// 200 remaining=0 reset=40 retry-after=""
	// 429 remaining=0 reset=40 retry-after="40"
	// myadapter: nethttp.WithDenyHandler is an option of package nethttp, given to a myadapter middleware: package myadapter has no equivalent
}
