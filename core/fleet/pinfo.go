package fleet

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/limitkit/limitkit/core"
)

// pinfo is what the tier needs per policy, worked out once.
type pinfo struct {
	p           *core.Policy
	writeBack   bool
	countDenied bool
	denyCache   bool
	syncUs      int64         // write-back lease lifetime, µs
	leaseCap    int64         // units leased per key at most
	maxCost     int64         // costs above this decide alike (the largest effective capacity + 1)
	fixedUs     []int64       // fixed-window lengths (µs), for lease expiry
	local       *core.Policy  // the local share: each limit divided by the fleet size
	flap        *core.Policy  // the flap share: the local share's limits divided by 4 (see share.go); nil: none
	elastic     bool          // decided at the remote store every time (see Take)
	failMode    core.FailMode // the policy's, FailOpen read as WithDefaultFailMode's
}

// info returns p's pinfo, worked out on p's first use (an invalid p is an
// error).
func (s *fleetStore) info(p *core.Policy) (*pinfo, error) {
	if pi := (*s.policies.Load())[p]; pi != nil {
		return pi, nil
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return s.remember(p, s.newInfo(p)), nil
}

// newInfo works out p's pinfo: its settings read with the tier's
// defaults, its cost bound and lease cap, its local fallback policy.
func (s *fleetStore) newInfo(p *core.Policy) *pinfo {
	pi := &pinfo{p: p, countDenied: p.CountDenied, elastic: p.Elastic != nil, failMode: p.FailMode}
	if pi.failMode == core.FailOpen {
		pi.failMode = s.cfg.failMode
	}
	mode := p.Mode
	if mode == core.ModeDefault {
		mode = s.cfg.mode
	}
	pi.writeBack = mode == core.ModeWriteBack
	// Exact mode promises the remote store's decisions; under CountDenied
	// every denial changes the remote state, which a local cache cannot
	// reproduce, so the deny cache serves CountDenied policies only in
	// write-back mode or WithDeferredDenialCounts (their denials are then
	// forwarded at the next sync).
	pi.denyCache = !s.cfg.noDenyCache && (!p.CountDenied || pi.writeBack || s.cfg.deferCounts)
	sync := p.Sync
	if sync == 0 {
		sync = s.cfg.sync
	}
	if sync == 0 {
		sync = defaultWriteBackSync
	}
	pi.syncUs = max(1, sync.Microseconds())
	fleet := p.FleetSize
	if fleet == 0 {
		fleet = s.cfg.fleetSize
	}
	minCap := pi.sizeLimits()
	if pi.writeBack {
		pi.leaseCap = min(s.cfg.maxLease, minCap/(4*int64(fleet)))
	}
	pi.local = localPolicy(p, fleet)
	pi.flap = flapPolicy(pi.local)
	return pi
}

// sizeLimits sets maxCost and fixedUs from pi's policy's limits and
// returns the smallest capacity.
func (pi *pinfo) sizeLimits() (minCap int64) {
	p := pi.p
	minCap = int64(1 << 62)
	for _, l := range p.Limits {
		c := l.Requests
		if l.Burst > 0 {
			c = l.Burst
		}
		minCap = min(minCap, c)
		eff := c
		if p.SoftPercent > 0 {
			eff = c * int64(100+p.SoftPercent) / 100
		}
		pi.maxCost = max(pi.maxCost, eff+1)
		if p.Elastic != nil {
			pi.maxCost = max(pi.maxCost, c*int64(p.Elastic.CeilingPercent)/100+1)
		}
		if p.Algorithm == core.FixedWindow {
			pi.fixedUs = append(pi.fixedUs, max(1, l.Window.Microseconds()))
		}
	}
	return minCap
}

// localPolicy is the embedded store's policy for p on a fleet of fleet
// servers: each limit divided by the fleet size, decided hard; nil when
// the divided policy is not valid.
func localPolicy(p *core.Policy, fleet int) *core.Policy {
	lp := *p
	lp.Limits = slices.Clone(p.Limits)
	for i := range lp.Limits {
		l := &lp.Limits[i]
		l.Requests = max(1, l.Requests/int64(fleet))
		if l.Burst > 0 {
			l.Burst = max(1, l.Burst/int64(fleet))
		}
	}
	lp.Mode, lp.Sync, lp.FleetSize = core.ModeDefault, 0, 0
	lp.Elastic = nil // the local fallback decides the divided limits hard
	lp.Name = localName(&lp)
	if lp.Validate() != nil {
		return nil
	}
	return &lp
}

// remember publishes pi as p's pinfo and returns it, or the pinfo another
// goroutine published first. Past maxPolicies policies the map starts
// afresh.
func (s *fleetStore) remember(p *core.Policy, pi *pinfo) *pinfo {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	old := *s.policies.Load()
	if q := old[p]; q != nil {
		return q
	}
	m := make(map[*core.Policy]*pinfo, len(old)+1)
	if len(old) < maxPolicies {
		for k, v := range old {
			m[k] = v
		}
	}
	m[p] = pi
	s.policies.Store(&m)
	return pi
}

// localName names the embedded store's derived policy: the policy's name
// (shortened to fit) and a digest of what its state means, so that two
// policies sharing a name with different limits (a rules file reloaded
// with new limits) never share or refuse each other's local state.
// Decisions still report the policy's own name.
func localName(p *core.Policy) string {
	h := fnv.New64a()
	fmt.Fprint(h, p.Algorithm, p.Buckets, p.SoftPercent, p.Limits)
	name := p.Name
	if len(name) > 64-17 {
		name = name[:64-17]
	}
	return fmt.Sprintf("%s:%016x", name, h.Sum64())
}
