package fleet

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// fullMem is what the value memstore.New returns implements: the tests
// call its verbs directly, as core does through its optional interfaces.
type fullMem interface {
	memstore.Store
	storekit.LocalStore
	storekit.VerbStore
	storekit.ReserveStore
	storekit.ElasticStore
	storekit.Refunder
	storekit.SlotStore
	storekit.PolicyRegistrar
	PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error)
}

// fullRedis is what the value redisstore.New returns implements.
type fullRedis interface {
	redisstore.Store
	storekit.VerbStore
	storekit.ReserveStore
	storekit.ElasticStore
	storekit.Refunder
	storekit.SlotStore
	storekit.BatchStore
	storekit.DomainStore
	storekit.PolicyRegistrar
	TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
	MoveDeadline(dl time.Time) time.Time
	PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error)
}

// mustMem is memstore.MustNew with its verbs in view.
func mustMem(opts ...memstore.Option) fullMem { return memstore.MustNew(opts...).(fullMem) }
