package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneDomain hides the Redis store's failure domains: the tier then has one
// breaker, as before per-domain breakers (the baseline of the test below).
type oneDomain struct{ rs fullRedis }

func (o oneDomain) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return o.rs.Take(ctx, key, p, now, cost)
}

func (o oneDomain) TakeBatch(ctx context.Context, b []storekit.BatchTake) error {
	return o.rs.TakeBatch(ctx, b)
}

// keyStats counts one key's decisions.
type keyStats struct{ decided, degraded, admitted atomic.Int64 }

// runClusterMasterDown runs 4 tiers × 4 goroutines over 60 keys of a
// 3-master Cluster for 1.5 s (and at least 40 decisions a goroutine) with
// one master SIGSTOPped, and returns the
// per-key counts, the victim's address and each key's master.
func runClusterMasterDown(t *testing.T, domains bool) (map[string]*keyStats, map[string]string, string, int64) {
	const tiers, perTier, quota = 4, 4, 1500
	cl := redistest.StartCluster(t)
	pol := core.Policy{Name: "domains", FleetSize: tiers, Limits: []core.Limit{core.Per(quota, time.Hour)}}
	var lims []*core.Limiter
	var stores []*fleetStore
	var rs0 fullRedis
	for i := 0; i < tiers; i++ {
		rs := redisStore(t, cl.NewClient(t))
		var remote core.Store = rs
		if !domains {
			remote = oneDomain{rs}
		}
		rs0 = rs
		s := newTier(t, remote, WithFleetSize(tiers), WithBreaker(3, 200*time.Millisecond, 50*time.Millisecond))
		stores = append(stores, s)
		// a deadline of 500 ms, not the default 50 ms: at load 20 a
		// healthy master's answer misses 50 ms often enough to open its
		// own domain's breaker, which is the host, not the code, and the
		// victim's calls fail no matter the deadline (its breaker opens
		// after three and fails fast from then on)
		lims = append(lims, core.MustNewLimiter(s, pol, core.WithTimeout(500*time.Millisecond)))
	}
	ctx := context.Background()
	keys := make([]string, 60)
	stats := map[string]*keyStats{}
	master := map[string]string{}
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
		stats[keys[i]] = &keyStats{}
		for _, l := range lims {
			// loads the slot maps and the script (on a loaded machine a
			// first call may miss its 50 ms deadline: try again); at
			// least 4 units per key, counted as 4 (a retried call may
			// have charged Redis too: the over-quota count below can only
			// be lower for it)
			var err error
			for try := 0; try < 20; try++ {
				if _, err = l.Allow(ctx, keys[i]); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond) // past a probe interval, should a breaker have opened
			}
			require.NoError(t, err)
		}
		master[keys[i]] = rs0.Domain(keys[i], lims[0].Policy())
		require.NotEmpty(t, master[keys[i]])
	}
	victim := cl.Nodes[0]
	victim.Pause()
	defer victim.Resume()
	stop := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < tiers*perTier; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lim := lims[g%tiers]
			// at least minEach decisions each, however slow the host:
			// on a starved machine 1.5 s held a dozen decisions in all,
			// too few for a share to mean anything
			const minEach = 40
			for i, n := g, 0; n < minEach || time.Now().Before(stop); i, n = i+1, n+1 {
				k := keys[i%len(keys)]
				d, _ := lim.Allow(ctx, k)
				st := stats[k]
				st.decided.Add(1)
				if d.Degraded {
					st.degraded.Add(1)
				}
				if d.Allowed {
					st.admitted.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	var openings int64
	for _, s := range stores {
		openings += s.breakerOpenings()
	}
	for _, k := range keys {
		stats[k].admitted.Add(int64(tiers)) // the warm-up
	}
	return stats, master, victim.Addr, openings
}

// TestClusterMasterDownAffectsOnlyItsKeys: with one master of three
// SIGSTOPped, the victim's keys go to the fail mode (local) while the
// keys of the two healthy masters are decided by Redis — never over
// quota, and degraded less than half as often as the victim's keys
// are in the same run, measured by the same goroutines (the limiters'
// store deadline is 500 ms: with the default 50 ms a loaded machine
// made a healthy master miss deadlines and open its own breaker at
// times, up to 55 % of its decisions degraded at load 40). The same run with one breaker per
// tier (the store's domains hidden) is reported: there the victim's
// outage takes the healthy keys with it, to nearly its own share.
func TestClusterMasterDownAffectsOnlyItsKeys(t *testing.T) {
	const quota = 1500
	for _, domains := range []bool{false, true} {
		stats, master, victim, openings := runClusterMasterDown(t, domains)
		var hDecided, hDegraded, hOver, vDecided, vDegraded int64
		for k, st := range stats {
			if master[k] == victim {
				vDecided += st.decided.Load()
				vDegraded += st.degraded.Load()
				continue
			}
			hDecided += st.decided.Load()
			hDegraded += st.degraded.Load()
			// a key some of whose decisions fell back (under -race, a
			// healthy master's answer can miss its deadline) is held
			// to the FailLocal bound, twice the quota; the others to
			// the quota
			bound := int64(quota)
			if st.degraded.Load() > 0 {
				bound = 2 * quota
			}
			hOver += max(0, st.admitted.Load()-bound)
		}
		t.Logf("per-domain breakers %v: healthy masters: %d decisions, %.1f%% degraded, %d units over quota; victim: %d decisions, %.1f%% degraded; %d breaker openings",
			domains, hDecided, 100*float64(hDegraded)/float64(max(1, hDecided)), hOver, vDecided, 100*float64(vDegraded)/float64(max(1, vDecided)), openings)
		share := float64(hDegraded) / float64(max(1, hDecided))
		vShare := float64(vDegraded) / float64(max(1, vDecided))
		if !domains {
			continue
		}
		require.NotZero(t, hDecided)
		assert.Less(t, share, vShare/2, "a healthy master's keys are decided by Redis, not failed with the victim's")
		assert.Zero(t, hOver, "a healthy master's keys never go over quota (over the FailLocal bound for a key that fell back)")
		assert.NotZero(t, vDegraded, "the victim's keys go to the fail mode")
	}
}
