package httplimit

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// ctxStore is a local verb store over a memstore that records, for each
// verb, whether the context it was given had ended and had a deadline,
// and fails a call on an ended context, as a store doing I/O would.
type ctxStore struct {
	ms    storekit.VerbStore
	mu    sync.Mutex
	calls []ctxCall
}

type ctxCall struct {
	verb     string
	ended    bool
	deadline time.Duration // from the call; 0: none
}

func (s *ctxStore) Local() bool { return true }

func (s *ctxStore) rec(ctx context.Context, verb string) error {
	c := ctxCall{verb: verb, ended: ctx.Err() != nil}
	if dl, ok := ctx.Deadline(); ok {
		c.deadline = time.Until(dl)
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *ctxStore) verbs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v []string
	for _, c := range s.calls {
		v = append(v, c.verb)
	}
	s.calls = nil
	return v
}

func (s *ctxStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if err := s.rec(ctx, "take"); err != nil {
		return core.Decision{}, err
	}
	return s.ms.Take(ctx, key, p, now, cost)
}

func (s *ctxStore) Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if err := s.rec(ctx, "peek"); err != nil {
		return core.Decision{}, err
	}
	return s.ms.Peek(ctx, key, p, now, cost)
}

func (s *ctxStore) Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if err := s.rec(ctx, "charge"); err != nil {
		return core.Decision{}, err
	}
	return s.ms.Charge(ctx, key, p, now, cost)
}

func (s *ctxStore) Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if err := s.rec(ctx, "refund"); err != nil {
		return core.Decision{}, err
	}
	return s.ms.Credit(ctx, key, p, now, cost)
}

func (s *ctxStore) Reset(ctx context.Context, key string, p *core.Policy) error {
	if err := s.rec(ctx, "reset"); err != nil {
		return err
	}
	return s.ms.Reset(ctx, key, p)
}

var _ storekit.VerbStore = (*ctxStore)(nil)

// outcomeRig is an engine counting failed logins (401) on a ctxStore,
// with reset on success (ChargeFirst when first).
func outcomeRig(t *testing.T, first bool) (*Engine, *ctxStore, *[]error) {
	t.Helper()
	ms := memstore.MustNew()
	t.Cleanup(func() { _ = ms.Close() })
	st := &ctxStore{ms: ms.(storekit.VerbStore)}
	l := core.MustNewLimiter(st, core.Policy{Name: "login", Limits: []core.Limit{core.PerMinute(5)}})
	var errs []error
	e, err := NewAdapterEngine(counting, l, WithOutcome(Outcome{Count: StatusIn(401), ResetOnSuccess: true, ChargeFirst: first}),
		WithErrorHook(func(_ context.Context, err error) { errs = append(errs, err) }))
	require.NoError(t, err)
	return e, st, &errs
}

// decideLogin decides one POST /login from a fixed peer on ctx.
func decideLogin(t *testing.T, ctx context.Context, e *Engine) *Result {
	t.Helper()
	r, _ := http.NewRequestWithContext(ctx, "POST", "http://example.com/login", nil)
	r.Pattern, r.RemoteAddr = "POST /login", "203.0.113.7:1"
	res := decide(e, ctx, httpView{r})
	require.Equal(t, Pass, res.Action)
	return &res
}

// The doc of Engine.Outcome says a second call for the same request
// settles nothing: an adapter that settles twice (a deferred settle
// after a normal one) must not charge twice.
func TestOutcomeSettledTwiceChargesOnce(t *testing.T) {
	e, st, _ := outcomeRig(t, false)
	ctx := context.Background()
	res := decideLogin(t, ctx, e)
	e.Outcome(ctx, res, 401)
	e.Outcome(ctx, res, 401)
	e.Outcome(ctx, res, OutcomePanic)
	assert.Equal(t, []string{"peek", "charge"}, st.verbs())
	res = decideLogin(t, ctx, e)
	e.Outcome(ctx, res, 200)
	e.Outcome(ctx, res, 200)
	assert.Equal(t, []string{"peek", "reset"}, st.verbs())
}

// The charge after the response of a client that went away runs on a
// context detached from the request's cancellation (the store is asked
// on a live context, and the charge lands), with a deadline of its own,
// outcomeTimeout at most.
func TestOutcomeChargeDetachedFromRequestCancellation(t *testing.T) {
	e, st, errs := outcomeRig(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	res := decideLogin(t, ctx, e)
	st.verbs()
	cancel()
	e.Outcome(ctx, res, 401)
	require.Empty(t, *errs)
	st.mu.Lock()
	calls := st.calls
	st.mu.Unlock()
	require.Len(t, calls, 1)
	assert.Equal(t, "charge", calls[0].verb)
	assert.False(t, calls[0].ended, "the charge ran on the request's cancelled context")
	assert.Greater(t, calls[0].deadline, time.Duration(0), "the charge ran without a deadline of its own")
	assert.LessOrEqual(t, calls[0].deadline, outcomeTimeout)
	st.verbs()
	d, err := e.checks[0].lim.PeekN(context.Background(), "POST /login|203.0.113.7", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(3), d.Remaining, "one unit charged (remaining after one more: 3 of 5)")
}

// Each outcome that is no status (a panic, nothing written, a cancelled
// request) is a counted failure: charged, never reset; under ChargeFirst
// the quota taken is kept. A cancelled request is one whatever status
// the handler wrote.
func TestOutcomeFailsSafe(t *testing.T) {
	for _, first := range []bool{false, true} {
		settle := []string{"charge"}
		if first {
			settle = nil
		}
		for _, tc := range []struct {
			name   string
			status int
			cancel bool
		}{
			{"panic", OutcomePanic, false},
			{"unwritten", OutcomeUnwritten, false},
			{"canceled", outcomeCanceled, false},
			{"success on a cancelled request", 200, true},
			{"uncounted status on a cancelled request", 500, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e, st, errs := outcomeRig(t, first)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				decideLogin(t, ctx, e)
				st.verbs()
				res := decideLogin(t, ctx, e)
				if tc.cancel {
					cancel()
				}
				e.Outcome(ctx, res, tc.status)
				assert.Empty(t, *errs)
				take := "peek"
				if first {
					take = "take"
				}
				assert.Equal(t, append([]string{take}, settle...), st.verbs(), "first=%v", first)
			})
		}
	}
}

// Issue 37: the check before the handler of a request counted by outcome
// is a decision to the observer (core.EventDecision, allowed or denied),
// so that metrics see a brute force; the charge after is an EventCharge.
func TestOutcomePeekIsADecision(t *testing.T) {
	ms := memstore.MustNew()
	defer ms.Close()
	var mu sync.Mutex
	events := map[string]int{}
	obs := core.ObserverFunc(func(ev core.Event) {
		mu.Lock()
		kind := ev.Kind.String()
		if ev.Kind == core.EventVerb {
			kind = ev.Verb
		}
		events[kind+"/"+map[bool]string{true: "allowed", false: "denied"}[ev.Decision.Allowed]]++
		mu.Unlock()
	})
	l := core.MustNewLimiter(ms, core.Policy{Name: "login", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(2)}}, core.WithObserver(obs))
	e, err := NewAdapterEngine(counting, l, WithOutcome(Outcome{Count: StatusIn(401)}))
	require.NoError(t, err)
	r, _ := http.NewRequest("POST", "http://example.com/login", nil)
	r.Pattern, r.RemoteAddr = "POST /login", "203.0.113.7:1"
	for range 3 {
		res := decide(e, context.Background(), httpView{r})
		e.Outcome(context.Background(), &res, 401)
	}
	assert.Equal(t, map[string]int{"decision/allowed": 2, "decision/denied": 1, "charge/allowed": 1, "charge/denied": 1}, events)
}
