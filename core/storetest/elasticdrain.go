package storetest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// barrierSignal holds the first n Acquires of its signal until all n have
// asked (or a deadline passed), then lets them go on together: every
// request of a burst finds capacity before any reaches its elastic take,
// the interleaving in which a client drained the capacity (issue 22).
type barrierSignal struct {
	sig     core.CapacitySignal
	n       int64
	arrived atomic.Int64
	all     chan struct{}
}

func (b *barrierSignal) Acquire(ctx context.Context, cost int64) (bool, error) {
	ok, err := b.sig.Acquire(ctx, cost)
	switch a := b.arrived.Add(1); {
	case a == b.n:
		close(b.all)
	case a < b.n:
		select {
		case <-b.all:
		case <-time.After(10 * time.Second):
		}
	}
	return ok, err
}

func (b *barrierSignal) Release(ctx context.Context, cost int64) {
	if r, ok := b.sig.(interface{ Release(context.Context, int64) }); ok {
		r.Release(ctx, cost)
	}
}

// ElasticDrain checks that one client cannot drain the fleet-wide elastic
// capacity (issue 22): limit 10 per minute, ceiling 200%, a CapacityLimit
// of 100 per minute. One key sends 200 concurrent requests, spread over
// stores (app servers sharing one state), all finding capacity before
// any elastic take: it gets 10 nominal and 10 elastic admissions, and the
// capacity its 90 losing requests took comes back, so 18 other clients
// (at most 10 elastic admissions each) then get the other 90. Time stands still (opts must
// hold a manual clock the stores honour, inside one hour), so nothing
// refills. It runs with a capacity limit of each algorithm a store can
// refund (GCRA and fixed window).
func ElasticDrain(t *testing.T, stores func(t *testing.T) []core.Store, opts ...core.Option) {
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) { elasticDrain(t, stores(t), alg, opts...) })
	}
}

func elasticDrain(t *testing.T, stores []core.Store, alg core.Algorithm, opts ...core.Option) {
	t.Helper()
	servers := drainServers(t, stores, alg, opts...)
	nominal, elastic := drainBurst(t, servers[0])
	require.Equal(t, int64(10), nominal, "the attacker's nominal admissions")
	require.Equal(t, int64(10), elastic, "the attacker's elastic admissions: its ceiling")

	ctx := context.Background()
	var others atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 18; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				// half through the server that saw the burst (whose
				// local state, such as a deny cache, must not hold on to
				// capacity that came back), half through the next one
				d, err := servers[(c/10)%len(servers)].Allow(ctx, "client"+strconv.Itoa(c))
				assert.NoError(t, err)
				if d.Elastic {
					others.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(drainCapacity)-elastic, others.Load(),
		"the attacker consumed exactly its elastic admissions of the capacity; the others got the rest")
}

// burstRequests and drainCapacity: the requests of the attacker's burst,
// and the capacity limit the servers share.
const burstRequests, drainCapacity = 200, 100

// drainServers builds one elastic Limiter (10 per minute, ceiling 200 %)
// per store, each signalled by a capacity limit of alg on the store; the
// first server's signal holds the barrier of the burst.
func drainServers(t *testing.T, stores []core.Store, alg core.Algorithm, opts ...core.Option) []*core.Limiter {
	var servers []*core.Limiter
	for i, s := range stores {
		capL, err := core.NewLimiter(s, core.Policy{Name: "drain-capacity", Algorithm: alg, Limits: []core.Limit{core.PerMinute(drainCapacity)}}, opts...)
		require.NoError(t, err)
		capSig, err := core.NewCapacityLimit(capL, "fleet")
		require.NoError(t, err)
		var sig core.CapacitySignal = capSig
		bs := &barrierSignal{sig: capSig, n: burstRequests - 10, all: make(chan struct{})}
		if i == 0 {
			sig = bs
		}
		l, err := core.NewLimiter(s, core.Policy{Name: "drain-api", Limits: []core.Limit{core.PerMinute(10)},
			Elastic: &core.Elastic{CeilingPercent: 200, Signal: sig}}, opts...)
		require.NoError(t, err)
		servers = append(servers, l)
	}
	return servers
}

// drainBurst sends the attacker's burst through l, concurrently, and
// counts its nominal and its elastic admissions.
func drainBurst(t *testing.T, l *core.Limiter) (nominal, elastic int64) {
	ctx := context.Background()
	var nom, ela atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < burstRequests; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// the burst goes through the first server (whose signal holds
			// the barrier); it shares the capacity with the others
			d, err := l.Allow(ctx, "attacker")
			assert.NoError(t, err)
			switch {
			case d.Elastic:
				ela.Add(1)
			case d.Allowed:
				nom.Add(1)
			}
		}()
	}
	wg.Wait()
	return nom.Load(), ela.Load()
}
