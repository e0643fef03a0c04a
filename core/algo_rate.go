package core

import "time"

// The state layout and the write modes are algo.go's.

// For store implementers: EmissionInterval is the time one unit of cost
// takes to refill under l for
// GCRA and the token bucket, in whole microseconds, rounded up so the
// configured rate is never exceeded.
func EmissionInterval(l Limit) int64 {
	w := int64(l.Window / time.Microsecond)
	return (w + l.Requests - 1) / l.Requests
}

// gcra: state [tat]. T = emission interval, tau = capacity × T. A request
// of cost c is admitted when max(tat, now) + c×T − now ≤ tau.
//
// A tat beyond now + tau cannot be written at now. Up to now + 2×tau it is
// an instant read a little late (a concurrent caller read the clock first
// and reached the state second) or a small clock step, and stays in force:
// normalizing it would hand the lateness back as quota at every such
// race. Beyond that the clock went back (or a client clock ran fast under
// WithClientTime): it is read as now + tau, an empty bucket, so no stored
// state implies a wait longer than two full refills: a clock stepped back
// by an hour costs a user the burst it had, never an hour.
func gcra(k *plan, st []int64, now, cost int64, mode int) lres {
	t, tau := k.t, k.tau
	if st[0]-now > 2*k.tauMax {
		st[0] = now + k.tauMax
	}
	tat := max(st[0], now)
	newTat := tat + cost*t
	if newTat-now <= tau {
		if mode != evalOnly && cost > 0 {
			st[0] = newTat
		}
		return lres{ok: true, remaining: (tau - (newTat - now)) / t, resetAfter: newTat - now}
	}
	r := lres{remaining: max(0, (tau-(tat-now))/t), resetAfter: tat - now, retryAfter: newTat - tau - now}
	if cost*t > tau {
		r.retryAfter = never
	}
	if mode == writeAlways {
		// counted up to an empty bucket, never lowering a tat that a late
		// caller finds ahead of its now
		st[0] = max(tat, min(newTat, now+tau))
		r.resetAfter = st[0] - now
	}
	return r
}

// tokenBucket: state [tokens, last]. A new key (last == 0) is full. Whole
// tokens are added every T since last, the remainder carried, up to the
// capacity; a full bucket restarts its refill clock at now. A clock that
// went back adds nothing; a last refill more than a full refill
// (capacity × T) beyond now + tokens × T, which only a clock step can
// leave, is moved back to now + tokens × T (within that margin the state
// stays in force: a caller that read the clock before a concurrent one
// must not move the refill back).
func tokenBucket(k *plan, st []int64, now, cost int64, mode int) lres {
	t, capa := k.t, k.capa
	tokens, last := tbRefill(k, st, now)
	if cost <= tokens+k.debt {
		tokens -= cost
		if mode != evalOnly && cost > 0 {
			st[0], st[1] = tokens, last
		}
		return lres{ok: true, remaining: tokens, resetAfter: max(0, last+(capa-tokens)*t-now)}
	}
	r := lres{remaining: tokens, resetAfter: max(0, last+(capa-tokens)*t-now), retryAfter: last + (cost-tokens-k.debt)*t - now}
	if cost > capa+k.debt {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0], st[1] = 0, last
		r.resetAfter = max(0, last+capa*t-now)
	}
	return r
}

// tbRefill is the token bucket's (tokens, last) at now before a request:
// a fresh key full, whole tokens added since last, a refill instant that
// only a clock step can leave moved back (written to st; see tokenBucket).
func tbRefill(k *plan, st []int64, now int64) (tokens, last int64) {
	t, capa := k.t, k.capa
	tokens, last = st[0], st[1]
	if last == 0 {
		tokens, last = capa, now
	} else if last-now > (tokens+k.debtMax)*t+k.tau {
		l := now + max(tokens, 0)*t
		st[1], last = l, l
	} else if now > last {
		n := (now - last) / t
		if tokens+n >= capa {
			tokens, last = capa, now
		} else {
			tokens += n
			last += n * t
		}
	}
	return tokens, last
}
