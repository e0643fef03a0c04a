package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core/fleet"
	"github.com/limitkit/limitkit/core/redisstore"
)

// TestNewTypedNilRemote: fleet.New given the typed nil of an ignored
// redisstore.New error refuses it with an error saying what to fix,
// instead of building a tier whose every remote call panics.
func TestNewTypedNilRemote(t *testing.T) {
	var remote *redisstore.Store
	var s *fleet.Store
	var err error
	require.NotPanics(t, func() { s, err = fleet.New(remote) })
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "nil *redisstore.Store")
	assert.Contains(t, err.Error(), "redisstore.New's error")
}
