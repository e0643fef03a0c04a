package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/nethttp"
)

// TestOverridesTakeTheAPIKeyAsSent (issue 37): WithOverrides said "its
// API key gets 50,000 a minute", but the map key had to be the SHA-256
// that keyfuncs.APIKey returns. The API key as the client sends it now
// names the client (hashed inside, with an HMAC secret too); the client
// key still works; another key gets the default.
func TestOverridesTakeTheAPIKeyAsSent(t *testing.T) {
	store := memstore.MustNew()
	defer store.Close()
	plain, err := keyfuncs.APIKey("X-API-Key", "")
	require.NoError(t, err)
	keyed, err := keyfuncs.APIKeyHMAC("X-API-Key", "", []byte("0123456789abcdef0123"))
	require.NoError(t, err)
	hashed, err := plain(presented("k_hashed"))
	require.NoError(t, err)
	for name, fn := range map[string]keyfuncs.Func{"sha256": plain, "hmac": keyed, "tagged": keyfuncs.Tagged("key", plain)} {
		t.Run(name, func(t *testing.T) {
			def := core.MustNewLimiter(store, core.Policy{Name: name + "-default", Limits: []core.Limit{core.PerMinute(1)}})
			big := core.MustNewLimiter(store, core.Policy{Name: name + "-big", Limits: []core.Limit{core.PerMinute(3)}})
			hashedLim := core.MustNewLimiter(store, core.Policy{Name: name + "-hashed", Limits: []core.Limit{core.PerMinute(2)}})
			over := map[string]*core.Limiter{"k_big": big}
			if name == "sha256" {
				over[hashed] = hashedLim // the client key, as before
			}
			mw, err := nethttp.NewMiddleware(def, httplimit.WithKey(fn), httplimit.WithOverrides(over))
			require.NoError(t, err)
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			quota := func(key string) int {
				for n := range 10 {
					r := httptest.NewRequest("GET", "/", nil)
					r.Header.Set("X-API-Key", key)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code == http.StatusTooManyRequests {
						return n
					}
				}
				return 10
			}
			assert.Equal(t, 3, quota("k_big"), "the override, named by the key as sent")
			assert.Equal(t, 1, quota("k_other"), "the default")
			if name == "sha256" {
				assert.Equal(t, 2, quota("k_hashed"), "an override named by its client key")
			}
		})
	}
}

func presented(key string) keyfuncs.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", key)
	return keyfuncs.FromHTTP(r)
}
