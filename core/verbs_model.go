package core

import "time"

// This file holds the math of the quota verbs beyond Take (Peek, Charge,
// Refund and the reservation behind Wait), shared by every store like
// Take's (algo.go, algo_rate.go, algo_window.go). Each works on a key's
// state words in place, in whole µs, with every product bounded as in
// Take's (costs are clamped first), so that
// the Lua port computes the same integers.
//
// What Charge and Refund do per algorithm (k: one limit; C its effective
// capacity, T its emission interval, W its window):
//
//	GCRA        Charge: tat = max(tat, now) + cost×T, capped at now + 2×C×T:
//	            the key owes at most one full quota, repaid at the
//	            normal rate (a request of cost 1 waits at most C×T + T).
//	            Refund: tat = max(now, tat − cost×T) (never below now: a
//	            full bucket).
//	TokenBucket Charge: tokens −= cost, down to −C (a debt of one full
//	            bucket, refilled at the normal rate: a wait of at most
//	            2×C×T). Refund: tokens += cost, up to C.
//	FixedWindow Charge: the window in force counts cost more, up to C: a
//	            key is denied for the rest of that window at most; units
//	            above C are forgiven when it ends. Refund: its count
//	            falls by up to cost; an ended window gets nothing back.
//	SlidingWindowLog  Charge: min(cost, C) units are logged at now
//	            (max(now, newest)); past C they overwrite the oldest
//	            entries, which thereby leave the window later: the key
//	            is denied at most one window after the charge. Refund:
//	            up to cost of the newest units still inside the window
//	            are removed; units that left the window are not returned.
//	SlidingWindowCounter  Charge: the current bucket counts cost more, up
//	            to C; a wait of at most a window and a bucket. Refund:
//	            up to cost units leave the window's buckets, newest first;
//	            the bucket partly out of the window (the estimate's
//	            weighted oldest) and older ones get nothing back.
//
// A multi-limit policy charges and refunds every limit (no
// all-or-nothing: the work happened, or did not). Costs above these
// bounds act as the bound, so a huge cost never overflows.

// verbCap bounds a Charge or Refund cost for limit k: beyond it every
// result saturates (two full quotas plus an elastic overdraft).
func verbCap(k *plan) int64 { return 2*(k.capa+k.debtMax) + 1 }

// For store implementers: PeekTo writes into *d the decision a request of
// cost would get at now on state, consuming nothing: Decide on a copy.
// scratch (len >= StateWords) receives the copy; state is left as it was
// (only normalized, as by any Decide). A Decision's ElasticRoom is
// cleared: a peek never draws elastic capacity.
func (c *Compiled) PeekTo(d *Decision, state, scratch []int64, now, cost int64) {
	s := scratch[:c.words]
	copy(s, state)
	c.DecideTo(d, s, now, cost)
	d.ElasticRoom = false
}

// For store implementers: ChargeTo consumes cost at now on state in every
// limit, even beyond the limit (the key then owes the excess, bounded per
// algorithm as the package's verbs doc states), and writes into *d the
// key's state afterwards (see [Compiled.ReportTo]). cost < 0 is 0.
func (c *Compiled) ChargeTo(d *Decision, state []int64, now, cost int64) {
	c.apply(d, state, now, cost, true)
}

// For store implementers: RefundTo returns up to cost units at now to
// state in every limit (never beyond a fresh key's quota, never into an
// ended window; per algorithm as the package's verbs doc states), and
// writes into *d the key's state afterwards (see [Compiled.ReportTo]).
// cost < 0 is 0.
func (c *Compiled) RefundTo(d *Decision, state []int64, now, cost int64) {
	c.apply(d, state, now, cost, false)
}

// apply charges (or refunds) cost in every limit, then reports.
func (c *Compiled) apply(d *Decision, state []int64, now, cost int64, charge bool) {
	now = min(max(now, 0), MaxNow)
	if cost > 0 {
		for i := range c.limits {
			k := &c.limits[i]
			st, n := state[k.off:k.off+k.sz], min(cost, verbCap(k))
			if charge {
				c.charge(k, st, now, n)
			} else {
				c.refund(k, st, now, n)
			}
		}
	}
	c.ReportTo(d, state, now)
}

// For store implementers: ReportTo writes into *d the key's state at now,
// consuming nothing: Remaining is what the binding limit (the one with
// the least room) would still admit; Allowed reports whether a request of
// cost 1 would be admitted, and when it would not, RetryAfter is the
// exact wait until it would be (the longest over the limits) and Limit
// the limit that makes it wait; ResetAfter is the binding limit's time
// until full. It is what Charge and Refund return.
func (c *Compiled) ReportTo(d *Decision, state []int64, now int64) {
	*d = Decision{}
	now = min(max(now, 0), MaxNow)
	var bind *plan
	var br lres
	for i := range c.limits {
		k := &c.limits[i]
		st := state[k.off : k.off+k.sz]
		r0 := c.step(k, st, now, 0, evalOnly)
		r1 := c.step(k, st, now, 1, evalOnly)
		r := lres{ok: r1.ok, remaining: r0.remaining, resetAfter: r0.resetAfter, retryAfter: r1.retryAfter}
		if bind == nil || binds(r, br, k, bind) {
			bind, br = k, r
		}
	}
	c.decision(d, bind, br)
}

func (c *Compiled) charge(k *plan, st []int64, now, cost int64) {
	c.step(k, st, now, 0, evalOnly) // normalize a clock step, as any decision
	switch c.p.Algorithm {
	case GCRA:
		tat := max(st[0], now) + cost*k.t
		st[0] = max(st[0], min(tat, now+2*k.tau))
	case TokenBucket:
		tokens, last := tbRefill(k, st, now)
		st[0], st[1] = max(tokens-cost, min(tokens, -k.capa)), last
	case FixedWindow:
		idx, count := fwInForce(k, st, now)
		st[0] = int64(uint64(idx)<<fwCountBits) | max(count, min(count+cost, k.capa))
	case SlidingWindowLog:
		ring := st[1:]
		n, r := int64(len(ring)), st[0]
		newest := max(ring[(r+n-1)%n]-1, 0)
		m := min(cost, k.capa)
		fillRing(ring, r, m, max(now, newest)+1)
		st[0] = (r + m) % n
	case SlidingWindowCounter:
		ctr, idx := counterInForce(k, st, now)
		if idx != ctr.cur {
			for j := max(ctr.cur+1, idx-k.n); j <= idx; j++ {
				ctr.counts[j%ctr.slots] = 0
			}
			st[0] = idx
		}
		b := &ctr.counts[idx%ctr.slots]
		*b = max(*b, min(*b+cost, k.capa))
	}
}

func (c *Compiled) refund(k *plan, st []int64, now, cost int64) {
	c.step(k, st, now, 0, evalOnly)
	switch c.p.Algorithm {
	case GCRA:
		if st[0] > now {
			st[0] = max(now, st[0]-cost*k.t)
		}
	case TokenBucket:
		if st[1] == 0 {
			return // a fresh key is full
		}
		tokens, last := tbRefill(k, st, now)
		tokens += cost
		if tokens >= k.capa {
			tokens, last = k.capa, now
		}
		st[0], st[1] = tokens, last
	case FixedWindow:
		if idx, count := fwInForce(k, st, now); count > 0 {
			st[0] = int64(uint64(idx)<<fwCountBits) | max(0, count-cost)
		}
	case SlidingWindowLog:
		ring := st[1:]
		n, r := int64(len(ring)), st[0]
		cut := max(now-k.w+1, 0)
		// the newest units inside the window, newest first, become the
		// ring's oldest (empty) slots
		m := int64(0)
		for m < min(cost, n) && ring[(r+n-1-m)%n] > cut {
			ring[(r+n-1-m)%n] = 0
			m++
		}
		st[0] = (r + n - m) % n
	case SlidingWindowCounter:
		ctr, idx := counterInForce(k, st, now)
		for j := min(idx, ctr.cur); j > idx-k.n && cost > 0; j-- {
			v := ctr.bucket(j)
			take := min(v, cost)
			if take > 0 {
				ctr.counts[j%ctr.slots] -= take
				cost -= take
			}
		}
	}
}

// fwInForce is the fixed window in force at now (an ended one's count is
// 0) on a state already normalized by a decision.
func fwInForce(k *plan, st []int64, now int64) (idx, count int64) {
	idx = k.index(now)
	count = st[0] & fwCountMask
	if count != 0 {
		stored := uint64(st[0]) >> fwCountBits
		diff := int64((uint64(idx)-stored)<<fwCountBits) >> fwCountBits
		if diff > 0 {
			count = 0
		} else {
			idx -= diff
		}
	}
	return idx, count
}

// counterInForce is the sliding counter and its bucket in force at now
// (a stored current bucket up to a window ahead stays in force), on a
// state already normalized by a decision.
func counterInForce(k *plan, st []int64, now int64) (counter, int64) {
	ctr := counter{counts: st[1:], cur: st[0], slots: k.n + 1}
	idx := now / k.bl
	if idx < ctr.cur {
		idx = ctr.cur
	}
	return ctr, idx
}

// For store implementers: ReserveTo is the reservation behind
// [Limiter.WaitN]. For GCRA and the token bucket, a request that must
// wait at most maxWait µs (and at most one full quota's refill time,
// the bound of a Charge's debt) is admitted now for later: its cost is
// consumed in every limit at once and *d is Allowed with RetryAfter the
// wait until its turn. Otherwise, and for every other algorithm, it is
// DecideTo (a request admitted now has RetryAfter 0; a denied one
// consumes nothing, or is counted under CountDenied, and RetryAfter is
// the exact wait). A Shadow policy never reserves.
func (c *Compiled) ReserveTo(d *Decision, state []int64, now, cost, maxWait int64) {
	if cost < 0 {
		cost = 0
	}
	now = min(max(now, 0), MaxNow)
	if c.p.Shadow || (c.p.Algorithm != GCRA && c.p.Algorithm != TokenBucket) {
		c.DecideTo(d, state, now, cost)
		return
	}
	var bind *plan
	wait := int64(0)
	for i := range c.limits {
		k := &c.limits[i]
		r := c.step(k, state[k.off:k.off+k.sz], now, cost, evalOnly)
		if r.ok {
			continue
		}
		if r.retryAfter == never || r.retryAfter > min(maxWait, k.tau) {
			c.DecideTo(d, state, now, cost)
			return
		}
		if bind == nil || r.retryAfter > wait {
			bind, wait = k, r.retryAfter
		}
	}
	if bind == nil {
		c.DecideTo(d, state, now, cost)
		return
	}
	for i := range c.limits {
		k := &c.limits[i]
		st := state[k.off : k.off+k.sz]
		if c.p.Algorithm == GCRA {
			st[0] = max(st[0], now) + cost*k.t
		} else {
			tokens, last := tbRefill(k, st, now)
			st[0], st[1] = tokens-cost, last
		}
	}
	c.ReportTo(d, state, now)
	d.Allowed, d.Remaining = true, 0
	d.Limit = bind.l
	d.RetryAfter = time.Duration(wait) * time.Microsecond
}
