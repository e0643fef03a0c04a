package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/limitkit/limitkit/core"
)

// maxBatch bounds the entries of one sync round trip.
const maxBatch = 512

// tick is the period of the background sync rounds: the tier's
// sync interval, or DefaultWriteBackSync when the tier is exact by default
// (rounds then only forward and renew for policies that ask for them).
func (s *Store) tick() time.Duration {
	if s.cfg.sync > 0 {
		return s.cfg.sync
	}
	return DefaultWriteBackSync
}

// syncLoop runs a sync round every tick (skipped while the breaker is
// open). It stops at Close.
func (s *Store) syncLoop() {
	defer s.wg.Done()
	tk := time.NewTicker(s.tick())
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			if s.brk.isOpen() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), min(s.tick(), time.Second)+core.DefaultTimeout)
			_ = s.Sync(ctx)
			cancel()
		}
	}
}

// probeLoop probes every probe interval while the breaker is open (see
// Probe); a goroutine of its own, so a sync round stuck on a hung remote
// store never delays a probe. It runs only for a remote store with Ping,
// and stops at Close.
func (s *Store) probeLoop() {
	defer s.wg.Done()
	tk := time.NewTicker(s.cfg.probe)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			if !s.brk.isOpen() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.probe)
			_ = s.Probe(ctx)
			cancel()
		}
	}
}

// Probe pings the remote store when the breaker is open and its cool-down
// has passed (at the tier's clock), and closes the breaker when the ping
// succeeds. It returns the ping's error, or nil when there was nothing to
// probe. A background goroutine calls it every probe interval; tests
// call it by hand. For a remote store without a Ping method it does
// nothing: the first request after the cool-down is the probe.
func (s *Store) Probe(ctx context.Context) error {
	if s.ping == nil || !s.brk.isOpen() || s.brk.coolingDown(s.cfg.clock.Now()) {
		return nil
	}
	if err := s.ping.Ping(ctx); err != nil {
		return fmt.Errorf("fleet: probe: %w", err)
	}
	s.brk.success()
	return nil
}

// op is one entry of a sync round.
type op struct {
	e       *entry
	sh      *shard
	forward int64 // locally denied cost forwarded (CountDenied)
	renew   int64 // lease units asked for
}

// Sync runs one sync round now: it forwards the cost of locally denied
// requests (CountDenied), renews the leases of write-back keys that were
// used since the last round and hold less than half their lease size, and
// drops expired leases (their unused units are lost: under-admission). All
// of it goes to the remote store in one batched round trip (per 512
// entries; one pipeline per node for the Redis store). The background
// goroutine calls it every tick; tests call it by hand.
//
// It does nothing while the breaker is open (forwarded counts wait for the
// remote store to return). Failures count towards the breaker, and the
// forwarded cost is kept for the next round. It returns the first error.
func (s *Store) Sync(ctx context.Context) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.brk.isOpen() {
		return nil
	}
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
			o := op{e: e, sh: sh}
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
func (s *Store) syncBatch(ctx context.Context, now time.Time, ops []op) error {
	t := now.UnixMicro()
	b := make([]core.BatchTake, 0, 2*len(ops))
	for _, o := range ops {
		if o.forward > 0 {
			b = append(b, core.BatchTake{Key: o.e.k.key, Policy: o.e.k.p, Now: now, Cost: o.forward})
		}
		if o.renew > 0 {
			b = append(b, core.BatchTake{Key: o.e.k.key, Policy: o.e.k.p, Now: now, Cost: o.renew})
		}
	}
	start := time.Now()
	err := s.takeBatch(ctx, b)
	lat := time.Since(start)
	var first error
	if err != nil {
		first = err
		s.failed(ctx, err)
	} else {
		ok := false
		for i := range b {
			if b[i].Err == nil {
				ok = true
			} else if first == nil {
				first = b[i].Err
			}
		}
		if ok {
			s.brk.success()
		} else if first != nil {
			s.failed(ctx, first)
		}
	}
	j := 0
	for _, o := range ops {
		var fw, rn *core.BatchTake
		if o.forward > 0 {
			fw = &b[j]
			j++
		}
		if o.renew > 0 {
			rn = &b[j]
			j++
		}
		e, sh := o.e, o.sh
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
					e.grant(e.pi, t, o.renew, d)
					e.remaining = d.Remaining
					e.last, e.lastAt = d, t
				} else {
					e.remaining = 0
				}
			}
		}
		sh.mu.Unlock()
	}
	if o := s.cfg.observer; o != nil {
		o.Observe(core.Event{Kind: core.EventSync, Keys: len(b), Latency: lat, Err: first})
	}
	if first != nil {
		return fmt.Errorf("fleet: sync: %w", first)
	}
	return nil
}
