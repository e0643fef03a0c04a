package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// maxBatch bounds the entries of one sync round trip.
const maxBatch = 512

// tick is the period of the background sync rounds: the tier's
// sync interval, or 100 ms when the tier is exact by default
// (rounds then only forward and renew for policies that ask for them).
func (s *fleetStore) tick() time.Duration {
	if s.cfg.sync > 0 {
		return s.cfg.sync
	}
	return defaultWriteBackSync
}

// syncLoop runs a sync round every tick (each skips the domains whose
// breaker is open) and reclaims the breakers of vanished domains. It
// stops at Close.
func (s *fleetStore) syncLoop() {
	defer s.wg.Done()
	tk := time.NewTicker(s.tick())
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			ctx, cancel := context.WithTimeout(context.Background(), min(s.tick(), time.Second)+core.DefaultTimeout)
			_ = s.Sync(ctx)
			cancel()
			s.dom.sweep(s.cfg.clock.Now())
		}
	}
}

// probeDeadline is the least deadline of a background probe: longer than
// a request's, so that a loaded process can still see its store answer.
const probeDeadline = 4 * core.DefaultTimeout

// probeLoop probes, every probe interval, each open breaker whose retry
// time has passed, on a goroutine of its own (a sync round stuck on a hung
// domain never delays a probe): the probe is a real decision — the key of
// the domain's last failed request, taken at cost 0 (a peek: it runs the
// same script as a decision and consumes nothing) under a deadline of one
// probe interval, at least probeDeadline. An answer closes the breaker, an outage reopens it for a
// probe interval. Health is thus judged by the operation that failed, not
// by PING (which a Redis under CLIENT PAUSE WRITE answers while its
// scripts hang). Requests past the retry time may probe too. It stops at
// Close.
func (s *fleetStore) probeLoop() {
	defer s.wg.Done()
	tk := time.NewTicker(s.cfg.probe)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			s.probeOpen()
		case <-s.cfg.wake:
			s.probeOpen()
		}
	}
}

// probeOpen probes each open breaker whose retry time has passed (see
// probeLoop).
func (s *fleetStore) probeOpen() {
	for _, b := range s.dom.open() {
		k := b.probe.Load()
		if k == nil {
			continue
		}
		if !b.halfOpen(0) {
			s.watch(b, k)
			continue
		}
		start := s.health.Now()
		ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.probe, probeDeadline))
		_, err := s.remote.Take(ctx, k.key, k.p, s.cfg.clock.Now(), 0)
		s.report(ctx, b, err, start) // before cancel: a timeout, not a cancellation
		cancel()
	}
}

// watch starts, for a breaker open within its cool-down whose last
// outage was a timeout, one call on a goroutine of its own, unless one is
// in flight: the key of the domain's last failed request at cost 0 (as
// the probe), under no deadline but the cool-down (and the client's own
// socket timeouts). A slow Redis is not a dead one: a reply that arrives
// late, when a stall ends (a redis-server starved of CPU on a busy host
// answered after 228-663 ms), proves the domain alive and closes the
// breaker then, instead of after the cool-down, during which every request
// would be decided by its fail mode. A stopped or dead Redis never
// replies: the breaker opened as fast as without the watch, and stays open
// until the probes find an answer. A watch that times out wakes the loop
// to start the next at once; a connection failure (a Redis that is gone,
// not slow) ends the watching until the breaker opens again. At most one
// command per domain is thus in flight while it cools down. Only the
// background probe loop watches (tests that probe by hand do not).
func (s *fleetStore) watch(b *breaker, k *ekey) {
	if s.cfg.wake == nil || !b.slow.Load() || !b.watching.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.life, s.cfg.coolDown)
		start := s.health.Now()
		_, err := s.remote.Take(ctx, k.key, k.p, s.cfg.clock.Now(), 0)
		o := s.report(ctx, b, err, start) // before cancel: a timeout, not a cancellation
		cancel()
		b.watching.Store(false)
		if o == outage && b.slow.Load() {
			select { // still slow: watch again
			case s.cfg.wake <- struct{}{}:
			default:
			}
		}
	}()
}

// op is one entry of a sync round.
type op struct {
	e       *entry
	sh      *shard
	forward int64 // locally denied cost forwarded (CountDenied)
	renew   int64 // lease units asked for
	brk     *breaker
}

// Sync runs one sync round now: it forwards the cost of locally denied
// requests (CountDenied) and of fallback admissions, renews the leases of write-back keys that were
// used since the last round and hold less than half their lease size, and
// drops expired leases (their unused units are lost: under-admission). All
// of it goes to the remote store in one batched round trip (per 512
// entries; one pipeline per node for the Redis store). The background
// goroutine calls it every tick; tests call it by hand.
//
// Keys whose failure domain has its breaker open are left for a later
// round (forwarded counts wait for the domain to return). Each entry's
// outcome counts towards its own domain's breaker, and the forwarded cost
// of a failed entry is kept for the next round. It returns the first
// error.
func (s *fleetStore) Sync(ctx context.Context) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	now := s.cfg.clock.Now()
	t := now.UnixMicro()
	var ops []op
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		list := sh.dirty
		sh.dirty = nil
		for _, e := range list {
			e.queued = false
			o := op{e: e, sh: sh, brk: s.breakerFor(e.k.key, e.k.p)}
			if o.brk.isOpen() {
				sh.queue(e) // the domain is down: next round
				continue
			}
			if e.pending > 0 {
				o.forward, e.pending = e.pending, 0
			}
			pi := e.pi
			expired := t >= e.leaseUntil || t < e.leaseAt
			if expired && e.lease > 0 {
				if e.lease*2 > e.granted {
					e.size = max(2, e.size/2) // mostly unused: lease less
				}
				e.lease, e.granted = 0, 0
			}
			if pi.writeBack && !pi.countDenied && !e.gone && e.used > 0 && e.grab == nil && pi.leaseCap > 0 {
				held := e.lease
				if held*2 < e.size {
					o.renew = max(0, min(e.size-held, pi.leaseCap-held, e.remaining/2))
				}
				if o.renew > 0 {
					e.startGrab()
				}
			}
			e.used = 0
			if o.forward > 0 || o.renew > 0 {
				ops = append(ops, o)
			}
		}
		sh.mu.Unlock()
	}
	var first error
	for len(ops) > 0 {
		n := min(len(ops), maxBatch)
		if err := s.syncBatch(ctx, now, ops[:n]); err != nil && first == nil {
			first = err
		}
		ops = ops[n:]
	}
	return first
}

// syncBatch sends one round trip of ops and applies the results.
func (s *fleetStore) syncBatch(ctx context.Context, now time.Time, ops []op) error {
	b := syncTakes(ops, now)
	start, began := time.Now(), s.health.Now()
	err := s.takeBatch(ctx, b)
	lat := time.Since(start)
	first := s.reportBatch(ctx, ops, b, err, began)
	j := 0
	for _, o := range ops {
		var fw, rn *storekit.BatchTake
		if o.forward > 0 {
			fw = &b[j]
			j++
		}
		if o.renew > 0 {
			rn = &b[j]
			j++
		}
		s.applySync(ctx, o, fw, rn, err, now)
	}
	if o := s.cfg.observer; o != nil {
		o.Observe(core.Event{Kind: core.EventSync, Keys: len(b), Latency: lat, Err: first})
	}
	if first != nil {
		return fmt.Errorf("fleet: sync: %w", first)
	}
	return nil
}

// syncTakes lists the takes of a sync round: for each op, its forward
// then its renewal, when it has them.
func syncTakes(ops []op, now time.Time) []storekit.BatchTake {
	b := make([]storekit.BatchTake, 0, 2*len(ops))
	for _, o := range ops {
		if o.forward > 0 {
			b = append(b, storekit.BatchTake{Key: o.e.k.key, Policy: o.e.k.p, Now: now, Cost: o.forward})
		}
		if o.renew > 0 {
			b = append(b, storekit.BatchTake{Key: o.e.k.key, Policy: o.e.k.p, Now: now, Cost: o.renew})
		}
	}
	return b
}

// applySync applies to o's entry the outcome of its forward fw and its
// renewal rn (nil when o has none; err is the round trip's): a failed
// forward is pending again, a granted renewal is the new lease.
func (s *fleetStore) applySync(ctx context.Context, o op, fw, rn *storekit.BatchTake, err error, now time.Time) {
	t := now.UnixMicro()
	e, sh := o.e, o.sh
	granted := false
	sh.mu.Lock()
	if fw != nil && (err != nil || fw.Err != nil) {
		e.pending = min(e.pending+o.forward, e.pi.maxCost) // not counted yet: next round
		if !e.gone {
			sh.queue(e)
		}
	}
	if rn != nil {
		e.endGrab()
		if err == nil && rn.Err == nil {
			d := rn.Decision
			if d.Allowed && !d.Shadowed {
				granted = true
				e.grant(e.pi, t, o.renew, d)
				e.remaining = d.Remaining
				e.last, e.lastAt = d, t
			} else {
				e.remaining = 0
			}
		}
	}
	sh.mu.Unlock()
	if fw != nil && err == nil && fw.Err == nil {
		s.chargeRest(ctx, e.k.key, e.pi, now, fw.Decision, storekit.BatchTake{})
	}
	if granted {
		s.chargeLocal(ctx, e.k.key, e.pi, now, o.renew)
	}
}

// reportBatch reports the outcome of a sync round trip to each domain's
// breaker, once per domain: answered when one of its entries was answered,
// else the first entry's outcome (every entry of the round trip when err,
// the batch as a whole, is set). It returns the first error.
func (s *fleetStore) reportBatch(ctx context.Context, ops []op, b []storekit.BatchTake, err error, start int64) error {
	type verdict struct {
		ok  bool
		err error
	}
	seen := make(map[*breaker]*verdict, 1)
	first := err
	j := 0
	for _, o := range ops {
		v := seen[o.brk]
		if v == nil {
			v = &verdict{}
			seen[o.brk] = v
		}
		for n := btoi(o.forward > 0) + btoi(o.renew > 0); n > 0; n-- {
			e := err
			if e == nil {
				e = b[j].Err
			}
			j++
			if e != nil && first == nil {
				first = e
			}
			if e == nil || s.classify(ctx, o.brk, e, start) == answered {
				v.ok = true
			} else if v.err == nil {
				v.err = e
				o.brk.probe.Store(&o.e.k)
			}
		}
	}
	for brk, v := range seen {
		if v.ok {
			s.report(ctx, brk, nil, start)
		} else {
			s.report(ctx, brk, v.err, start)
		}
	}
	return first
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
