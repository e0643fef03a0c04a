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
// was ignored holds a typed nil (var s *redisstore.Store); NewLimiter
// refuses it with an error that names the type and says what to fix,
// instead of panicking at construction or on the first request.
func TestNewLimiterTypedNilStore(t *testing.T) {
	p := core.Policy{Name: "p", Limits: []core.Limit{core.PerMinute(10)}}
	cases := []struct {
		name  string
		store core.Store
		typ   string
	}{
		{"memstore", (*memstore.Store)(nil), "*memstore.Store"},
		{"redisstore", (*redisstore.Store)(nil), "*redisstore.Store"},
		{"fleet", (*fleet.Store)(nil), "*fleet.Store"},
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
