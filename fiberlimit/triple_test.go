package fiberlimit

import (
	"context"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"net/http/httptest"
)

// TestSetTripleMatchesSetFields: the common response's headers written
// by setTriple are those setFields writes from the engine's Fields, over
// limits, counts and both reset formats.
func TestSetTripleMatchesSetFields(t *testing.T) {
	st := memstore.MustNew()
	defer st.Close()
	rng := rand.New(rand.NewSource(3))
	for _, rf := range [][]httplimit.Option{nil, {httplimit.WithResetDelta()}} {
		for _, n := range []int64{1, 1000, 5000, 2_000_000_000} {
			lim := core.MustNewLimiter(st, core.Policy{Name: "p" + strconv.FormatInt(n, 10), Limits: []core.Limit{core.Per(n, time.Hour)}})
			e, err := httplimit.NewAdapterEngine(httplimit.Adapter{Name: "fiberlimit"}, lim, rf...)
			require.NoError(t, err)
			for i := 0; i < 200; i++ {
				r := httptest.NewRequest("GET", "/x", nil)
				r.RemoteAddr = "203.0.113.7:1"
				var res httplimit.Result
				e.Decide(context.Background(), httpView{keyfuncs.FromHTTP(r)}, nil, &res)
				if rng.Intn(2) == 0 {
					res.Decision.Remaining = []int64{0, 5, 1023, 1024, 1 << 40, -1}[rng.Intn(6)]
				}
				var tr httplimit.Triple
				ok := e.Triple(&res, &tr)
				if res.Action != httplimit.Pass {
					assert.False(t, ok)
					continue
				}
				require.True(t, ok)
				var want, got fasthttp.ResponseHeader
				var f httplimit.Fields
				e.Fields(&res, &f)
				setFields(&want, &f)
				setTriple(&got, &tr)
				require.Equal(t, want.String(), got.String(), "%+v", res.Decision)
			}
		}
	}
}

// httpView is a net/http request as an httplimit.Request, for the tests.
type httpView struct{ keyfuncs.Request }

func (httpView) AnyMethod() bool { return true }
