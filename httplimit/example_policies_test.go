package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// Login throttling: only failed logins count (3 here), and a success
// clears the username's count.
func ExampleWithOutcome() {
	store := memstore.MustNew()
	defer store.Close()
	perUser := core.MustNewLimiter(store, core.Policy{Name: "login", Limits: []core.Limit{core.PerHour(3)}})
	username, _ := keyfuncs.FormField("username")
	limit := nethttp.New(perUser, httplimit.WithKey(username),
		httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(401), ResetOnSuccess: true}))
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("password") != "demo" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("welcome")) // a handler that writes nothing would be a counted failure
	}))
	login := func(password string) int {
		r := httptest.NewRequest("POST", "/login", strings.NewReader("username=alice&password="+password))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(login("x"), login("x"), login("demo"), login("x"), login("x"), login("x"), login("x"))
	// Output: 401 401 200 401 401 401 429
}

// Plans: the limiter is chosen by the request's tier; an unknown or
// missing tier gets New's limiter.
func ExampleWithTiers() {
	store := memstore.MustNew()
	defer store.Close()
	limiter := func(name string, n int64) *core.Limiter {
		return core.MustNewLimiter(store, core.Policy{Name: name, Limits: []core.Limit{core.PerHour(n)}})
	}
	plan, _ := keyfuncs.Header("X-Plan") // in production: a verified JWT claim
	h := nethttp.New(limiter("api", 2), httplimit.WithTiers(plan, map[string]*core.Limiter{"pro": limiter("api/pro", 5)}))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	quota := func(tier string) (n int) {
		for {
			r := httptest.NewRequest("GET", "/v1/items", nil)
			r.Header.Set("X-Plan", tier)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				return n
			}
			n++
		}
	}
	fmt.Println(quota("free"), quota("pro"))
	// Output: 2 5
}
