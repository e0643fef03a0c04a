package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/ginlimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// Options written once against httplimit serve every adapter: here the
// same user+IP hybrid on net/http and on gin. httplimit.WithKey and
// httplimit.WithKey (or httplimit.WithKey) are the same option.
func Example() {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.MustNew()
	defer store.Close()
	users := core.MustNewLimiter(store, core.Policy{Name: "user", Limits: []core.Limit{core.PerMinute(2)}}, core.WithClock(clock))
	ips := core.MustNewLimiter(store, core.Policy{Name: "ip", Limits: []core.Limit{core.PerMinute(100)}}, core.WithClock(clock))
	userKey, err := keyfuncs.Header("X-User") // in production: a verified token, see keyfuncs.JWT
	if err != nil {
		panic(err)
	}
	opts := []httplimit.Option{
		httplimit.WithKey(userKey),
		httplimit.WithNoKeySkip(), // anonymous requests: the IP check alone
		httplimit.WithCheck(ips, nil),
		httplimit.WithResetDelta(),
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /a", func(w http.ResponseWriter, r *http.Request) {})
	std := nethttp.New(users, opts...)(mux)

	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	g.Use(ginlimit.New(users, opts...))
	g.GET("/b", func(c *gin.Context) {})

	for _, h := range []http.Handler{std, std, std, g} {
		target := "/a"
		if h == g {
			target = "/b"
		}
		r := httptest.NewRequest("GET", target, nil)
		r.RemoteAddr = "203.0.113.7:1234"
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%s %d remaining=%s", target, w.Code, w.Header().Get("X-RateLimit-Remaining"))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Printf(" retry-after=%s", ra)
		}
		fmt.Println()
	}
	// Output:
	// /a 200 remaining=1
	// /a 200 remaining=0
	// /a 429 remaining=0 retry-after=30
	// /b 200 remaining=1
}

// A deny handler tells the reasons apart with the Reason constants; the
// Rejection carries what the default denial would send.
func ExampleRejection() {
	store := memstore.MustNew()
	defer store.Close()
	l := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(1)}})
	deny := func(w http.ResponseWriter, r *http.Request, rej httplimit.Rejection) {
		switch rej.Reason {
		case httplimit.ReasonLimited:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(rej.Status)
			fmt.Fprintf(w, "policy %s: retry in %ds\n", rej.Decision.Policy, rej.RetryAfter)
		default: // ReasonUnavailable, ReasonNoKey: the default denial
			nethttp.WriteRejection(w, rej)
		}
	}
	h := nethttp.New(l, nethttp.WithDenyHandler(deny))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := 0; i < 2; i++ {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.7:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d %q\n", w.Code, w.Body.String())
	}
	// Output:
	// 200 ""
	// 429 "policy api: retry in 60s\n"
}

func ExampleReason_String() {
	fmt.Println(httplimit.ReasonLimited, httplimit.ReasonUnavailable, httplimit.ReasonNoKey)
	// Output: limited unavailable no_key
}
