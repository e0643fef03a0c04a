package fleet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/fleet"
)

// ptrStore is a store of some other package whose constructor returns a
// pointer (redisstore.New returns an interface, nil on error).
type ptrStore struct{ core.Store }

// TestNewTypedNilRemote: fleet.New given the typed nil of an ignored
// constructor error refuses it with an error saying what to fix, instead
// of building a tier whose every remote call panics.
func TestNewTypedNilRemote(t *testing.T) {
	var remote *ptrStore
	var s fleet.Store
	var err error
	require.NotPanics(t, func() { s, err = fleet.New(remote) })
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "nil *fleet_test.ptrStore")
	assert.Contains(t, err.Error(), "redisstore.New's error")
}
