package extadapter_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/nethttp"

	"example.com/extadapter"
)

func limiter(t *testing.T) *core.Limiter {
	t.Helper()
	store := memstore.MustNew()
	t.Cleanup(func() { store.Close() })
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	return core.MustNewLimiter(store, core.Policy{Name: "api", Algorithm: core.FixedWindow,
		Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clk))
}

func serve(h http.Handler, route string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/users/7", nil)
	req.RemoteAddr = "203.0.113.7:4000"
	req.Header.Set("X-Route", route)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func TestLimitsPerRoute(t *testing.T) {
	mw, err := extadapter.New(limiter(t))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(ok)
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "1"}, {200, "0"}, {429, "0"}} {
		rec := serve(h, "/users/:id")
		if rec.Code != want.status || rec.Header().Get("X-Ratelimit-Remaining") != want.remaining ||
			rec.Header().Get("X-Ratelimit-Limit") != "2" {
			t.Fatalf("request %d: %d %v, want %d with remaining %s", i, rec.Code, rec.Header(), want.status, want.remaining)
		}
	}
	rec := serve(h, "/users/:id")
	if rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Header().Get("Content-Type"), "problem+json") {
		t.Fatalf("denial without Retry-After or problem body: %v", rec.Header())
	}
	if rec := serve(h, "/orders"); rec.Code != 200 {
		t.Fatalf("another route shares the quota: %d", rec.Code)
	}
}

func TestDenyHandlerAndOptions(t *testing.T) {
	mw, err := extadapter.New(limiter(t), httplimit.WithScope("shared"),
		extadapter.WithDenyHandler(func(w http.ResponseWriter, _ *http.Request, rej httplimit.Rejection) {
			w.WriteHeader(http.StatusTeapot)
		}))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(ok)
	serve(h, "/a")
	serve(h, "/b")
	if rec := serve(h, "/c"); rec.Code != http.StatusTeapot {
		t.Fatalf("the deny handler was not used (or WithScope ignored): %d", rec.Code)
	}
}

func TestOtherAdaptersOptionIsAnError(t *testing.T) {
	_, err := extadapter.New(limiter(t), nethttp.WithDenyHandler(func(http.ResponseWriter, *http.Request, httplimit.Rejection) {}))
	if err == nil || !strings.Contains(err.Error(), "extadapter: nethttp.WithDenyHandler is an option of package nethttp") {
		t.Fatalf("err = %v", err)
	}
	_, err = nethttp.NewMiddleware(limiter(t), extadapter.WithDenyHandler(func(http.ResponseWriter, *http.Request, httplimit.Rejection) {}))
	if err == nil || !strings.Contains(err.Error(), "given to a nethttp middleware: use nethttp.WithDenyHandler") {
		t.Fatalf("err = %v", err)
	}
}

// TestWhatItCannotHonourIsAnError: this adapter never calls
// Engine.Outcome, so counting by outcome is refused rather than counting
// nothing; a misspelt adapter option is refused rather than ignored.
func TestWhatItCannotHonourIsAnError(t *testing.T) {
	_, err := extadapter.New(limiter(t), httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401)}))
	if want := "extadapter: httplimit.WithOutcome counts by the response's outcome, which an extadapter middleware does not report (it never calls Engine.Outcome): remove it"; err == nil || err.Error() != want {
		t.Fatalf("WithOutcome: err = %v, want %q", err, want)
	}
	_, err = extadapter.New(limiter(t), httplimit.AdapterOption("extadapter", "WithDenyHandlr",
		extadapter.DenyHandler(func(http.ResponseWriter, *http.Request, httplimit.Rejection) {})))
	if err == nil || !strings.Contains(err.Error(), "extadapter.WithDenyHandlr is not an option of package extadapter") {
		t.Fatalf("misspelt option: err = %v", err)
	}
}
