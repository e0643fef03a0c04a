package core_test

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// fullMem is what the value memstore.New returns implements besides
// memstore.Store: the optional store interfaces a Limiter finds by type
// assertion. Test stores embed it to change one of them.
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

// mustMem is memstore.MustNew with its optional interfaces in view.
func mustMem(opts ...memstore.Option) fullMem { return memstore.MustNew(opts...).(fullMem) }
