package memstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// take runs n Takes of cost 1 for key under p at t0 and counts the allowed.
func takeN(t *testing.T, s *memStore, p *core.Policy, key string, n int) (allowed int, last core.Decision) {
	t.Helper()
	for i := 0; i < n; i++ {
		d, err := s.Take(context.Background(), key, p, t0, 1)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
		last = d
	}
	return allowed, last
}

// TestReplaceStartsFreshAndKeepsInflight: a policy whose limits changed
// gets a new, empty table under its name, while the old policy (requests
// in flight across the replacement) keeps deciding on the old table, with
// the old limits, until Forget; then it is the configuration error again.
func TestReplaceStartsFreshAndKeepsInflight(t *testing.T) {
	s := mustNew()
	defer s.Close()
	oldP := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}}
	newP := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(10)}}

	n, _ := takeN(t, s, oldP, "alice", 7)
	require.Equal(t, 5, n)
	_, err := s.Take(context.Background(), "alice", newP, t0, 1)
	require.Error(t, err, "without Replace a same-named policy of other limits is refused")

	replaced, err := s.Replace(newP, oldP)
	require.NoError(t, err)
	require.True(t, replaced)

	n, d := takeN(t, s, newP, "alice", 12)
	assert.Equal(t, 10, n, "the new limits start fresh: full quota")
	assert.Equal(t, int64(10), d.Limit.Requests)
	n, d = takeN(t, s, oldP, "alice", 1)
	assert.Equal(t, 0, n, "the in-flight policy still sees its spent quota")
	assert.Equal(t, int64(5), d.Limit.Requests, "decided by the old limits")
	assert.Equal(t, 2, s.Stats().Policies, "the old table is held aside")

	s.Forget(oldP)
	assert.Equal(t, 1, s.Stats().Policies, "released: dropped")
	_, err = s.Take(context.Background(), "alice", oldP, t0, 1)
	assert.Error(t, err, "after Forget the old configuration is refused again")
	n, _ = takeN(t, s, newP, "alice", 1)
	assert.Equal(t, 0, n, "the new table kept its state through Forget")
}

// TestReplaceSameConfigKeepsState: Replace with a policy of the table's
// configuration (another *Policy, another fail mode) changes nothing.
func TestReplaceSameConfigKeepsState(t *testing.T) {
	s := mustNew()
	defer s.Close()
	p1 := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}}
	p2 := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}, FailMode: core.FailClosed}
	takeN(t, s, p1, "alice", 3)
	replaced, err := s.Replace(p2, p1)
	require.NoError(t, err)
	assert.False(t, replaced)
	n, _ := takeN(t, s, p2, "alice", 5)
	assert.Equal(t, 2, n, "3 of 5 were spent before: state kept")

	replaced, err = s.Replace(&core.Policy{Name: "unused", Limits: []core.Limit{core.PerHour(1)}})
	require.NoError(t, err)
	assert.False(t, replaced, "no table yet: nothing to replace")
	assert.Equal(t, 2, s.Stats().Policies, "but the name is registered")
	_, err = s.Take(context.Background(), "k", &core.Policy{Name: "unused", Limits: []core.Limit{core.PerHour(2)}}, t0, 1)
	assert.Error(t, err, "so that another configuration cannot take it first")
}

// TestReplaceWithoutInflightDrops: with no policy in flight the old table
// is dropped at once, and one held by two in-flight policies stays until
// both are forgotten.
func TestReplaceWithoutInflightDrops(t *testing.T) {
	s := mustNew()
	defer s.Close()
	a := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}}
	a2 := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}, FailMode: core.FailClosed}
	b := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(6)}}
	c := &core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(7)}}
	takeN(t, s, a, "k", 5)
	_, err := s.Replace(b, a, a2)
	require.NoError(t, err)
	s.Forget(a)
	n, d := takeN(t, s, a2, "k", 1)
	assert.Equal(t, 0, n, "a2 still holds the old table")
	assert.Equal(t, int64(5), d.Limit.Requests)
	s.Forget(a2, b) // b holds no set-aside table: ignored
	assert.Equal(t, 1, s.Stats().Policies)

	takeN(t, s, b, "k", 6)
	_, err = s.Replace(c) // nothing in flight
	require.NoError(t, err)
	assert.Equal(t, 1, s.Stats().Policies, "dropped at once")
	_, err = s.Take(context.Background(), "k", b, t0, 1)
	assert.Error(t, err)
	n, _ = takeN(t, s, c, "k", 8)
	assert.Equal(t, 7, n)
}

func TestReplaceErrors(t *testing.T) {
	s := mustNew()
	_, err := s.Replace(nil)
	assert.Error(t, err)
	_, err = s.Replace(&core.Policy{Name: "bad"})
	assert.ErrorContains(t, err, "memstore: Replace")
	s.Close()
	_, err = s.Replace(&core.Policy{Name: "api", Limits: []core.Limit{core.PerHour(5)}})
	assert.ErrorIs(t, err, core.ErrClosed)
}
