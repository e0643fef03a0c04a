package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
)

// TestNewLimiterTypedNilStore: a store variable whose constructor's error
// was ignored may hold a typed nil (var s *T of a store written
// elsewhere); NewLimiter
// refuses it with an error that names the type and says what to fix,
// instead of panicking at construction or on the first request.
func TestNewLimiterTypedNilStore(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}}
	cases := []struct {
		name  string
		store core.Store
		typ   string
	}{
		{"user store", (*mapStore)(nil), "*core_test.mapStore"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l *core.Limiter
			var err error
			require.NotPanics(t, func() { l, err = core.NewLimiter(c.store, p) })
			require.Error(t, err)
			assert.Nil(t, l)
			assert.Contains(t, err.Error(), "nil "+c.typ)
			assert.Contains(t, err.Error(), "constructor")
		})
	}
}

// TestNewLimiterFailedConstructors: the in-module constructors return a nil
// interface (never a typed nil) on error, which NewLimiter refuses as a
// nil store.
func TestNewLimiterFailedConstructors(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}}
	ms, err := memstore.New(memstore.WithMaxKeys(-1))
	require.Error(t, err)
	rs, err := redisstore.New(nil)
	require.Error(t, err)
	fs, err := fleet.New(nil)
	require.Error(t, err)
	for _, s := range []core.Store{ms, rs, fs} {
		require.Nil(t, s)
		_, err := core.NewLimiter(s, p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "nil store")
	}
}
