package httplimit

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// memVerbs is what memstore.New's value implements besides memstore.Store
// (core finds these by type assertion).
type memVerbs interface {
	memstore.Store
	storekit.LocalStore
	storekit.VerbStore
	storekit.ReserveStore
	storekit.PolicyRegistrar
}

// recStore is the embedded store recording the keys it takes or peeks.
type recStore struct {
	memVerbs
	keys []string
}

func newRecStore(t *testing.T) *recStore {
	m, err := memstore.New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return &recStore{memVerbs: m.(memVerbs)}
}

func (s *recStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, n int64) (core.Decision, error) {
	s.keys = append(s.keys, key)
	return s.memVerbs.Take(ctx, key, p, now, n)
}

func (s *recStore) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, n int64) (core.Decision, error) {
	s.keys = append(s.keys, key)
	return s.memVerbs.Peek(ctx, key, p, now, n)
}

func formReq(target, body string) Request {
	r, _ := http.NewRequest(http.MethodPost, "http://example.com"+target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = "192.0.2.1:1234"
	return httpView{r}
}

// engines are the three decide paths a form key can take: one check, two
// checks (user and IP), and counting by outcome (the login rule's).
func refusalEngines(t *testing.T, st core.Store, opts ...Option) map[string]*Engine {
	t.Helper()
	user, err := keyfuncs.FormField("username")
	require.NoError(t, err)
	out := map[string]*Engine{}
	for name, extra := range map[string][]Option{
		"one check":  nil,
		"two checks": {WithCheck(limiter(t, st, "ip"), nil)},
		"outcome":    {WithCheck(limiter(t, st, "ip"), nil), WithOutcome(Outcome{Count: StatusIn(401), ResetOnSuccess: true})},
	} {
		e, err := NewAdapterEngine(Adapter{Name: "x", Outcome: true}, limiter(t, st, "login"), append(append([]Option{WithKey(user), WithIdentity()}, opts...), extra...)...)
		require.NoError(t, err)
		out[name] = e
	}
	return out
}

// TestRefusedKeyIsNeverFallback: a key function's keyfuncs.Refusal denies
// with the refusal's status and detail (ReasonRefused, nothing counted,
// no quota headers), whatever the no-key options say: never keyed by the fallback
// IP key, never skipped.
func TestRefusedKeyIsNeverFallback(t *testing.T) {
	for _, mode := range []Option{WithFallbackKey(keyfuncs.PeerIP().Key), WithNoKeySkip(), WithFallbackKey(func(keyfuncs.Request) (string, error) { return "fb", nil })} {
		st := newRecStore(t)
		for name, e := range refusalEngines(t, st, mode) {
			for _, c := range []struct {
				target, body string
				status       int
			}{
				{"/login?username=victim", "username=decoy", 400},
				{"/login", "username=victim&x=%zz", 400},
				{"/login", "username=victim&p=" + strings.Repeat("x", formBodyMax), 413},
			} {
				res := decide(e, context.Background(), formReq(c.target, c.body))
				require.Equal(t, Deny, res.Action, "%s: %s %s", name, c.target, c.body)
				assert.Equal(t, ReasonRefused, res.Reason, name)
				_, ok := res.Identity()
				assert.False(t, ok, "a refused request has no identity")
				rej := e.Reject(&res)
				assert.Equal(t, c.status, rej.Status, name)
				assert.Zero(t, rej.RetryAfter)
				var p struct {
					Status int
					Detail string
				}
				require.NoError(t, json.Unmarshal(rej.Body, &p), "%s", rej.Body)
				assert.Equal(t, c.status, p.Status)
				assert.NotEmpty(t, p.Detail)
				h := http.Header{}
				e.SetHTTP(&res, h)
				assert.Empty(t, h.Get("Retry-After"))
				assert.Empty(t, h.Get("X-RateLimit-Limit"))
			}
		}
		assert.Empty(t, st.keys, "nothing counted, under no key")
	}
}

// TestResultIdentity: with WithIdentity, the identity is the primary
// check's client key from its WithKey function, on every decide path; an
// IP key, a fallback key or a skipped check give none, and without
// WithIdentity (the default) no request has one.
func TestResultIdentity(t *testing.T) {
	st := newRecStore(t)
	for name, e := range refusalEngines(t, st) {
		res := decide(e, context.Background(), formReq("/login", "username=+alice&password=x"))
		require.Equal(t, Pass, res.Action, name)
		id, ok := res.Identity()
		assert.True(t, ok, name)
		assert.Equal(t, "alice", id, name)
		assert.True(t, strings.HasSuffix(st.keys[0], "|alice"), st.keys[0])
		st.keys = nil
		res = decide(e, context.Background(), formReq("/login", "password=x"))
		require.Equal(t, Pass, res.Action, name)
		_, ok = res.Identity()
		assert.False(t, ok, "%s: keyed by the fallback IP key: no identity", name)
		st.keys = nil
	}
	user, err := keyfuncs.FormField("username")
	require.NoError(t, err)
	for name, opts := range map[string][]Option{
		"one check":  {WithKey(user)},
		"two checks": {WithKey(user), WithCheck(limiter(t, st, "ip2"), nil)},
		"outcome":    {WithKey(user), WithCheck(limiter(t, st, "ip3"), nil), WithOutcome(Outcome{Count: StatusIn(401)})},
	} {
		e, err := NewAdapterEngine(Adapter{Name: "x", Outcome: true}, limiter(t, st, "login-noid"), opts...)
		require.NoError(t, err)
		res := decide(e, context.Background(), formReq("/login", "username=alice&password=x"))
		require.Equal(t, Pass, res.Action, name)
		assert.True(t, strings.HasSuffix(st.keys[0], "|alice"), st.keys[0])
		_, ok := res.Identity()
		assert.False(t, ok, "%s: without WithIdentity the key is no identity", name)
		st.keys = nil
	}
	ip, err := newEngineNamed("x", limiter(t, st, "p"))
	require.NoError(t, err)
	res := decide(ip, context.Background(), formReq("/login", "username=alice"))
	_, ok := res.Identity()
	assert.False(t, ok, "the IP key is no identity")
	ctx := ContextWithIdentity(context.Background(), "alice")
	id, ok := Identity(ctx)
	assert.Equal(t, "alice", id)
	assert.True(t, ok)
	_, ok = Identity(context.Background())
	assert.False(t, ok)
}

// formBodyMax is the body FormField reads at most (64 KiB, its
// documented bound).
const formBodyMax = 64 << 10
