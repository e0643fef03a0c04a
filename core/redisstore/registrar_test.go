package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storetest"
	"github.com/limitkit/limitkit/internal/redistest"
)

// TestRegistry: on Redis, one name with two limits used to keep two
// quotas silently; it fails at NewLimiter (issue 22).
func TestRegistry(t *testing.T) {
	srv := redistest.StartNode(t)
	storetest.RunRegistry(t, func(t *testing.T) core.Store {
		c := srv.NewClient(t)
		require.NoError(t, c.FlushAll(context.Background()).Err())
		return newStore(t, c, WithClientTime())
	})
}
