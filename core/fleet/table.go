package fleet

import (
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
)

// ekey identifies an entry: the policy (by pointer, as the stores key
// their caches) and the client key.
type ekey struct {
	p   *core.Policy
	key string
}

// entry is one (policy, key)'s local state. Every field is guarded by its
// shard's mutex.
type entry struct {
	k  ekey
	pi *pinfo

	ref    bool // used since the clock hand last passed (CLOCK eviction)
	queued bool // on the shard's dirty list
	gone   bool // evicted (a sync may still hold it to forward pending)

	// Deny cache: a request of cost >= denyCost at t in [denyAt, denyUntil)
	// is denied as deny was, without a round trip.
	denyCost, denyAt, denyUntil int64
	deny                        core.Decision
	// pending is the locally denied cost not yet forwarded (CountDenied).
	pending int64

	// Write-back lease: lease units, charged at the remote store already,
	// may be admitted locally at t in [leaseAt, leaseUntil).
	lease, leaseAt, leaseUntil int64
	size                       int64         // the lease size the key is growing towards
	granted                    int64         // units granted in the current lease
	used                       int64         // units admitted locally since the last sync round
	grab                       chan struct{} // non-nil while a lease request is in flight; closed when it ends

	// The last remote decision and what it left.
	last      core.Decision
	lastAt    int64
	remaining int64
}

// denied is the cached denial as seen at t: the wait and the time to full
// shortened by the time elapsed since the denial.
func (e *entry) denied(t int64) core.Decision {
	d := e.deny
	el := time.Duration(t-e.denyAt) * time.Microsecond
	if d.RetryAfter != core.Never {
		d.RetryAfter = time.Duration(e.denyUntil-t) * time.Microsecond
	}
	d.ResetAfter = max(0, d.ResetAfter-el)
	return d
}

// deniesCached reports whether e's cached denial answers a request of
// cost at t: the same cost (or, in write-back mode, a larger one), within
// the denial's validity and the deny cache's ttl.
func (s *fleetStore) deniesCached(e *entry, pi *pinfo, t, cost int64) bool {
	return cost > 0 && e.denyCost > 0 && (cost == e.denyCost || pi.writeBack && cost > e.denyCost) && t >= e.denyAt && t < e.denyUntil && t-e.denyAt < s.denyTTL()
}

// leaseTime is the time at which a request started at t uses e's lease:
// the lease's start when the lease was charged after the request started
// (concurrent requests read the clock in any order, and a waiter started
// before the lease request it waited for), so that the request is decided
// after that charge.
func (e *entry) leaseTime(pi *pinfo, t int64) int64 {
	if t < e.leaseAt && e.leaseAt-t <= pi.syncUs {
		return e.leaseAt
	}
	return t
}

// startLease starts a lease request for e when none is in flight and
// the policy leases, and returns the units to ask for (0: none).
func (e *entry) startLease(pi *pinfo, t int64) (grab int64) {
	if e.grab == nil && pi.leaseCap > 0 {
		if grab = e.want(pi, t); grab > 0 {
			e.startGrab()
		}
	}
	return grab
}

// takeLease admits cost at t from e's lease.
func (e *entry) takeLease(t, cost int64) core.Decision {
	e.lease -= cost
	e.used += cost
	return e.leased(t)
}

// leased is the decision for a request admitted from the lease at t: the
// limit of the last remote decision, an estimate of what remains (the
// remote store's remaining after the lease was taken plus the units still
// leased here) and of the time to full.
func (e *entry) leased(t int64) core.Decision {
	return core.Decision{
		Allowed:    true,
		Limit:      e.last.Limit,
		Remaining:  e.remaining + e.lease,
		ResetAfter: max(0, e.last.ResetAfter-time.Duration(t-e.lastAt)*time.Microsecond),
		Policy:     e.last.Policy,
	}
}

// want is the number of units to lease with the next remote call at t, or
// 0: the lease size grows by doubling while the key stays hot, and is
// capped by the policy's lease cap, by what the key holds already, and by
// half of what the remote store had left at the last decision (a nearly
// exhausted key goes exact).
func (e *entry) want(pi *pinfo, t int64) int64 {
	if e.lastAt == 0 {
		return 0 // first sight: remaining unknown
	}
	if e.size == 0 {
		e.size = 2
	} else if t >= e.leaseAt && t < e.leaseUntil {
		e.size = min(2*e.size, pi.leaseCap) // ran out before it expired: hot
	}
	held := e.lease
	if t >= e.leaseUntil || t < e.leaseAt {
		held = 0
	}
	return max(0, min(e.size, pi.leaseCap-held, e.remaining/2))
}

// grant adds n units charged at t (remote decision d) to the lease. Units
// still held keep being valid until the new expiry: the total held never
// exceeds the lease cap (want ensures it).
func (e *entry) grant(pi *pinfo, t, n int64, d core.Decision) {
	if t >= e.leaseUntil || t < e.leaseAt {
		e.lease, e.granted = 0, 0
	}
	e.lease += n
	e.granted += n
	e.leaseAt = t
	e.leaseUntil = pi.leaseEnd(t, d)
}

// leaseEnd is the expiry of units leased at t: one sync interval later,
// and for the fixed window never past the end of the window they were
// charged in (of every limit, and of the remote decision's), so a fixed
// window's leases never cross a window boundary.
func (pi *pinfo) leaseEnd(t int64, d core.Decision) int64 {
	end := t + pi.syncUs
	for _, w := range pi.fixedUs {
		end = min(end, (t/w+1)*w)
	}
	if len(pi.fixedUs) > 0 {
		end = min(end, t+d.ResetAfter.Microseconds())
	}
	return end
}

// shard is one independently locked part of the table.
type shard struct {
	mu    sync.Mutex
	m     map[ekey]*entry
	ring  []*entry // the same entries, in the CLOCK's order
	hand  int      // the CLOCK hand: the next ring slot to look at
	dirty []*entry // entries the next sync round looks at
	_     [40]byte
}

// queue puts e on the dirty list once.
func (sh *shard) queue(e *entry) {
	if !e.queued {
		e.queued = true
		sh.dirty = append(sh.dirty, e)
	}
}

// insertFor inserts the entry of a key seen for the first time when the
// request will be loaded into it from the remote store: in write-back
// mode, for a cost (no lease yet: its remaining quota is unknown).
// Otherwise it returns nil.
func (sh *shard) insertFor(k ekey, pi *pinfo, cost int64, capa int) *entry {
	if pi.writeBack && cost > 0 {
		return sh.insert(k, pi, capa)
	}
	return nil
}

// insert adds a fresh entry for k. When the shard holds capa entries it
// evicts one first (CLOCK, second chance): the hand clears the referenced
// bit of the entries it passes and evicts the first one found clear, so an
// insert is O(1) amortized and at worst one turn of the ring.
func (sh *shard) insert(k ekey, pi *pinfo, capa int) *entry {
	e := &entry{k: k, pi: pi, ref: true}
	if len(sh.ring) < capa {
		sh.ring = append(sh.ring, e)
		sh.m[k] = e
		return e
	}
	for {
		sh.hand %= len(sh.ring)
		v := sh.ring[sh.hand]
		if v.ref {
			v.ref = false
			sh.hand++
			continue
		}
		delete(sh.m, v.k)
		v.gone = true
		sh.ring[sh.hand] = e
		sh.hand++
		sh.m[k] = e
		return e
	}
}

// startGrab marks a lease request in flight; requests finding the lease
// empty meanwhile wait for it (endGrab) instead of going remote.
func (e *entry) startGrab() { e.grab = make(chan struct{}) }

// endGrab ends the lease request in flight and wakes its waiters.
func (e *entry) endGrab() {
	if e.grab != nil {
		close(e.grab)
		e.grab = nil
	}
}
