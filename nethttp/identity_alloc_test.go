package nethttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/internal/adaptertest"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// TestIdentityAllocsOnlyWithIdentity: a header-keyed (WithKey) request
// costs the identity hand-over's two allocations (a context and a
// request copy) only with httplimit.WithIdentity; without it (the
// default) the handler sees no identity and the request allocates two
// objects fewer. Counted by testing.AllocsPerRun (no clock involved).
func TestIdentityAllocsOnlyWithIdentity(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	key, err := keyfuncs.APIKey("X-API-Key", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lim := core.MustNewLimiter(st, core.Policy{Name: "a", Limits: []core.Limit{core.Per(1<<30, time.Hour)}})
	allocs := func(opts ...httplimit.Option) (float64, string, bool) {
		var seen string
		var seenOK, read bool
		h := nethttp.New(lim, append([]httplimit.Option{httplimit.WithKey(key)}, opts...)...)(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if read { // once, outside the count: reading boxes the string
					seen, seenOK = nethttp.Identity(r)
				}
				w.WriteHeader(http.StatusOK)
			}))
		r, _ := http.NewRequest(http.MethodGet, "http://example.com/a", nil)
		r.RemoteAddr = "203.0.113.7:40001"
		r.Header.Set("X-API-Key", "k-0123456789abcdef")
		w := adaptertest.BenchWriter()
		read = true
		h.ServeHTTP(w, r) // also warms the key's entry
		read = false
		n := testing.AllocsPerRun(200, func() {
			clear(w.Header())
			h.ServeHTTP(w, r)
		})
		return n, seen, seenOK
	}
	without, seen, ok := allocs()
	if ok {
		t.Fatalf("without WithIdentity the handler got identity %q", seen)
	}
	with, seen, ok := allocs(httplimit.WithIdentity())
	if !ok || seen == "" {
		t.Fatal("with WithIdentity the handler got no identity")
	}
	t.Logf("allocations per header-keyed request: %v without WithIdentity, %v with", without, with)
	if with-without != 2 {
		t.Errorf("the identity hand-over costs %v allocations (with %v, without %v); want 2 (a context, a request copy) with WithIdentity and none without", with-without, with, without)
	}
}
