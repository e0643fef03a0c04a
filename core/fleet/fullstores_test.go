package fleet

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/redisstore"
)

// fullMem is what the value memstore.New returns implements: the tests
// call its verbs directly, as core does through its optional interfaces.
type fullMem interface {
	memstore.Store
	core.LocalStore
	core.VerbStore
	core.ReserveStore
	core.ElasticStore
	core.Refunder
	core.SlotStore
	core.PolicyRegistrar
	PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error)
}

// fullRedis is what the value redisstore.New returns implements.
type fullRedis interface {
	redisstore.Store
	core.VerbStore
	core.ReserveStore
	core.ElasticStore
	core.Refunder
	core.SlotStore
	core.BatchStore
	core.DomainStore
	core.PolicyRegistrar
	TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
	MoveDeadline(dl time.Time) time.Time
	PeekLimits(ctx context.Context, key string, p *core.Policy, now time.Time) ([]core.Decision, error)
}

// mustMem is memstore.MustNew with its verbs in view.
func mustMem(opts ...memstore.Option) fullMem { return memstore.MustNew(opts...).(fullMem) }
