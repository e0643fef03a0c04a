package core

import (
	"math"
	"time"
)

// This file holds the algorithms' math, shared by every store. All of it
// works on whole microseconds since the Unix epoch (int64) and integer
// counts below 2^31, so that a Lua port running on doubles (Redis) computes
// bit-identical results; the one floating-point formula (the sliding
// counter's weighted estimate) is written with explicit conversions so the
// compiler cannot fuse it, and in the same order as the Lua port.
//
// Per-key state is a []int64 of Policy.StateWords() words, zero meaning
// "fresh key"; each limit owns a consecutive run of words:
//
//	GCRA                 1 word:  tat, the theoretical arrival time (µs)
//	TokenBucket          2 words: tokens, last (µs of the last whole-token refill)
//	FixedWindow          1 word:  (window index mod 2^33) << 31 | count
//	SlidingWindowLog     1+C:     head, then a ring of C timestamps+1 (C = effective capacity)
//	SlidingWindowCounter 2+N:     current bucket index, then N+1 bucket counts

// write modes of a per-limit step.
const (
	evalOnly    = iota // compute the outcome, change nothing
	writeIfOK          // consume when allowed
	writeAlways        // consume when allowed; when denied, count it (capped)
)

// lres is one limit's outcome, in µs.
type lres struct {
	ok         bool
	remaining  int64 // against the effective capacity, after the request when ok
	resetAfter int64
	retryAfter int64 // -1: never
}

const never = -1

// StateWords is the number of int64 words of per-key state p needs.
func (p *Policy) StateWords() int {
	n := 0
	for _, l := range p.Limits {
		n += p.limitWords(l)
	}
	return n
}

func (p *Policy) limitWords(l Limit) int {
	switch p.Algorithm {
	case TokenBucket:
		return 2
	case SlidingWindowLog:
		return 1 + int(effective(l.Requests, p.SoftPercent))
	case SlidingWindowCounter:
		return 2 + p.buckets()
	}
	return 1
}

// Decide applies cost at now (µs since the Unix epoch) to state, a key's
// state under p (len(state) == p.StateWords(); all zero for a new key), and
// returns the decision. It updates state in place when the request consumes
// quota: when allowed, or when denied under CountDenied. A multi-limit
// decision is all-or-nothing. Decide is pure apart from state; the caller
// serializes calls per key. cost < 0 is treated as 0 (a peek that consumes
// nothing). p must be valid (see Validate).
func (p *Policy) Decide(state []int64, now, cost int64) Decision {
	if cost < 0 {
		cost = 0
	}
	if now < 0 {
		now = 0
	}
	mode := writeIfOK
	if p.CountDenied {
		mode = writeAlways
	}
	var d Decision
	if len(p.Limits) == 1 {
		r := p.step(p.Limits[0], state, now, cost, mode)
		d = p.decision(0, r)
	} else {
		// Pass 1 evaluates every limit; pass 2 consumes in all of them only
		// when all allow (or when denied requests count).
		bind, allOK := -1, true
		var br lres
		off := 0
		for i, l := range p.Limits {
			w := p.limitWords(l)
			r := p.step(l, state[off:off+w], now, cost, evalOnly)
			off += w
			if bind < 0 || p.binds(r, br, l, p.Limits[bind]) {
				bind, br = i, r
			}
			allOK = allOK && r.ok
		}
		if allOK || p.CountDenied {
			off = 0
			for _, l := range p.Limits {
				w := p.limitWords(l)
				p.step(l, state[off:off+w], now, cost, writeAlways)
				off += w
			}
		}
		d = p.decision(bind, br)
	}
	return d
}

// binds reports whether outcome a (of limit la) is more binding than b.
func (p *Policy) binds(a, b lres, la, lb Limit) bool {
	if a.ok != b.ok {
		return !a.ok
	}
	if !a.ok {
		if b.retryAfter == never {
			return false
		}
		return a.retryAfter == never || a.retryAfter > b.retryAfter
	}
	ra := p.nominalRemaining(a.remaining, la)
	rb := p.nominalRemaining(b.remaining, lb)
	return ra < rb || ra == rb && a.resetAfter > b.resetAfter
}

func (p *Policy) nominalRemaining(rem int64, l Limit) int64 {
	rem -= effective(l.capacity(), p.SoftPercent) - l.capacity()
	if rem < 0 {
		return 0
	}
	return rem
}

func (p *Policy) decision(i int, r lres) Decision {
	l := p.Limits[i]
	d := Decision{
		Allowed:    r.ok,
		Limit:      l,
		ResetAfter: time.Duration(r.resetAfter) * time.Microsecond,
		Policy:     p.Name,
	}
	if r.ok {
		d.Remaining = p.nominalRemaining(r.remaining, l)
		return d
	}
	if r.retryAfter == never {
		d.RetryAfter = Never
	} else {
		d.RetryAfter = time.Duration(r.retryAfter) * time.Microsecond
	}
	if p.Shadow {
		d.Allowed, d.Shadowed = true, true
	}
	return d
}

func (p *Policy) step(l Limit, st []int64, now, cost int64, mode int) lres {
	switch p.Algorithm {
	case TokenBucket:
		return p.tokenBucket(l, st, now, cost, mode)
	case FixedWindow:
		return p.fixedWindow(l, st, now, cost, mode)
	case SlidingWindowLog:
		return p.slidingLog(l, st, now, cost, mode)
	case SlidingWindowCounter:
		return p.slidingCounter(l, st, now, cost, mode)
	}
	return p.gcra(l, st, now, cost, mode)
}

// EmissionInterval is the time one unit of cost takes to refill under l for
// GCRA and the token bucket, in whole microseconds, rounded up so the
// configured rate is never exceeded.
func EmissionInterval(l Limit) int64 {
	w := int64(l.Window / time.Microsecond)
	return (w + l.Requests - 1) / l.Requests
}

// gcra: state [tat]. T = EmissionInterval, tau = capacity × T. A request of
// cost c is admitted when max(tat, now) + c×T − now ≤ tau.
func (p *Policy) gcra(l Limit, st []int64, now, cost int64, mode int) lres {
	t := EmissionInterval(l)
	tau := effective(l.capacity(), p.SoftPercent) * t
	tat := st[0]
	if tat < now {
		tat = now
	}
	newTat := tat + cost*t
	if newTat-now <= tau {
		if mode != evalOnly {
			st[0] = newTat
		}
		return lres{ok: true, remaining: (tau - (newTat - now)) / t, resetAfter: newTat - now}
	}
	r := lres{remaining: (tau - (tat - now)) / t, resetAfter: tat - now, retryAfter: newTat - tau - now}
	if r.remaining < 0 {
		r.remaining = 0
	}
	if cost*t > tau {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0] = min(newTat, now+tau)
		r.resetAfter = st[0] - now
	}
	return r
}

// tokenBucket: state [tokens, last]. A new key (last == 0) is full. Whole
// tokens are added every T since last, the remainder carried, up to the
// capacity; a full bucket restarts its refill clock at now.
func (p *Policy) tokenBucket(l Limit, st []int64, now, cost int64, mode int) lres {
	t := EmissionInterval(l)
	capa := effective(l.capacity(), p.SoftPercent)
	tokens, last := st[0], st[1]
	if last == 0 {
		tokens, last = capa, now
	} else if now > last {
		n := (now - last) / t
		if tokens+n >= capa {
			tokens, last = capa, now
		} else {
			tokens += n
			last += n * t
		}
	}
	if cost <= tokens {
		tokens -= cost
		if mode != evalOnly {
			st[0], st[1] = tokens, last
		}
		return lres{ok: true, remaining: tokens, resetAfter: max(0, last+(capa-tokens)*t-now)}
	}
	r := lres{remaining: tokens, resetAfter: max(0, last+(capa-tokens)*t-now), retryAfter: last + (cost-tokens)*t - now}
	if cost > capa {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0], st[1] = 0, last
		r.resetAfter = max(0, last+capa*t-now)
	}
	return r
}

const (
	fwCountBits = 31
	fwCountMask = 1<<fwCountBits - 1
	fwIndexBits = 64 - fwCountBits
)

// fixedWindow: state [(index mod 2^33) << 31 | count]. Windows are aligned
// to the epoch: index = now / W. A stored window later than now's (the
// clock went back) stays in force, so a clock jump never resets a count.
func (p *Policy) fixedWindow(l Limit, st []int64, now, cost int64, mode int) lres {
	w := int64(l.Window / time.Microsecond)
	capa := effective(l.Requests, p.SoftPercent)
	idx := now / w
	count := st[0] & fwCountMask
	if count != 0 {
		stored := uint64(st[0]) >> fwCountBits
		// signed difference of the 33-bit indexes
		diff := int64((uint64(idx)-stored)<<fwCountBits) >> fwCountBits
		if diff > 0 {
			count = 0
		} else {
			idx += diff
		}
	}
	end := (idx + 1) * w
	pack := func(c int64) int64 { return int64(uint64(idx)<<fwCountBits) | c }
	if count+cost <= capa {
		if mode != evalOnly && cost > 0 {
			st[0] = pack(count + cost)
		}
		return lres{ok: true, remaining: capa - count - cost, resetAfter: end - now}
	}
	r := lres{remaining: capa - count, resetAfter: end - now, retryAfter: end - now}
	if cost > capa {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0] = pack(min(count+cost, capa))
	}
	return r
}

// slidingLog: state [head, ring of C slots]; a slot holds an admitted
// unit's timestamp + 1 (0 = empty), written in arrival order at head. A
// timestamp ts is inside the window at now while ts > now − W. Admits when
// the units inside the window plus cost fit C.
func (p *Policy) slidingLog(l Limit, st []int64, now, cost int64, mode int) lres {
	w := int64(l.Window / time.Microsecond)
	ring := st[1:]
	c := int64(len(ring))
	head := st[0]
	cut := now - w + 1 // stored values (ts+1) > cut are inside
	var in, newest int64
	for _, v := range ring {
		if v > cut {
			in++
			newest = max(newest, v-1)
		}
	}
	if in+cost <= c {
		if mode != evalOnly {
			for i := int64(0); i < cost; i++ {
				ring[(head+i)%c] = now + 1
			}
			st[0] = (head + cost) % c
		}
		if cost > 0 {
			newest = max(newest, now)
		}
		rem := c - in - cost
		ra := int64(0)
		if in+cost > 0 {
			ra = newest + w - now
		}
		return lres{ok: true, remaining: rem, resetAfter: ra}
	}
	r := lres{remaining: c - in, resetAfter: newest + w - now}
	if cost > c {
		r.retryAfter = never
	} else {
		// Walk from the oldest slot; the k-th inside-window unit to leave
		// makes room, k = in + cost − C.
		need := in + cost - c
		for i := int64(0); i < c; i++ {
			v := ring[(head+i)%c]
			if v > cut {
				need--
				if need == 0 {
					r.retryAfter = v - 1 + w - now
					break
				}
			}
		}
	}
	if mode == writeAlways {
		k := min(cost, c)
		for i := int64(0); i < k; i++ {
			ring[(head+i)%c] = now + 1
		}
		st[0] = (head + k) % c
		r.resetAfter = w
	}
	return r
}

// slidingCounter: state [cur, N+1 counts]. Buckets last L = W/N; bucket i
// covers [i×L, (i+1)×L) and lives in count slot i mod (N+1). At now, in
// bucket i with e = now − i×L elapsed, the estimate of cost in the last W is
//
//	(sum of buckets i−N+1..i) + bucket(i−N) × ((L − e) / L)
//
// computed in float64 exactly in that order (see estimate). A clock that
// went back is evaluated at the start of the stored current bucket.
func (p *Policy) slidingCounter(l Limit, st []int64, now, cost int64, mode int) lres {
	n := int64(p.buckets())
	bl := int64(l.Window/time.Microsecond) / n
	capa := effective(l.Requests, p.SoftPercent)
	counts := st[1:]
	slots := n + 1
	idx := now / bl
	e := now - idx*bl
	cur := st[0]
	if idx < cur {
		idx, e = cur, 0
	}
	// bucket(j) for j in (idx−N−1, idx]: the stored count if still live.
	bucket := func(j int64) int64 {
		if j > cur || j <= cur-slots || j < 0 {
			return 0
		}
		return counts[j%slots]
	}
	var sum int64
	for j := idx - n + 1; j <= idx; j++ {
		sum += bucket(j)
	}
	oldest := bucket(idx - n)
	est := estimate(sum, oldest, bl, e)
	lim := capa - cost
	var r lres
	anything := sum+oldest > 0
	if est <= float64(lim) {
		r = lres{ok: true, remaining: int64(math.Floor(float64(capa) - (est + float64(cost))))}
		if r.remaining < 0 {
			r.remaining = 0
		}
		anything = anything || cost > 0
	} else {
		r = lres{remaining: max(0, int64(math.Floor(float64(capa)-est))), retryAfter: never}
		if cost <= capa {
			r.retryAfter = p.counterRetry(bucket, idx, e, n, bl, lim) - now
		}
	}
	if anything {
		// the newest bucket with cost leaves the window at (j+N+1)×L
		j := idx
		for j > idx-n-1 && bucket(j) == 0 && !(j == idx && r.ok && cost > 0) {
			j--
		}
		r.resetAfter = (j+n+1)*bl - now
	}
	if mode == writeAlways || mode == writeIfOK && r.ok {
		add := cost
		if !r.ok {
			add = min(cost, capa)
		}
		if add > 0 || idx != cur {
			if idx != cur {
				// roll forward: clear the slots of buckets cur+1..idx
				for j := max(cur+1, idx-slots+1); j <= idx; j++ {
					counts[j%slots] = 0
				}
				st[0] = idx
			}
			counts[idx%slots] += add
			if !r.ok {
				counts[idx%slots] = min(counts[idx%slots], capa)
				r.resetAfter = (idx+n+1)*bl - now
			}
		}
	}
	return r
}

// estimate is the sliding counter's weighted sum; Lua computes
// sum + oldest * ((L - e) / L) with the same roundings.
func estimate(sum, oldest, bl, e int64) float64 {
	w := float64(float64(bl-e) / float64(bl))
	return float64(sum) + float64(float64(oldest)*w)
}

// counterRetry returns the earliest instant (µs) at or after (idx, e) at
// which the estimate is at most lim, assuming nothing more is consumed.
func (p *Policy) counterRetry(bucket func(int64) int64, idx, e, n, bl, lim int64) int64 {
	for i := idx; i <= idx+n+1; i++ {
		var sum int64
		for j := i - n + 1; j <= i; j++ {
			sum += bucket(j)
		}
		if sum > lim {
			continue
		}
		oldest := bucket(i - n)
		start := int64(0)
		if i == idx {
			start = e
		}
		if estimate(sum, oldest, bl, start) <= float64(lim) {
			return i*bl + start
		}
		// oldest × (L − x)/L ≤ lim − sum  ⇔  x ≥ L − (lim − sum)×L/oldest
		x := bl - int64(float64(lim-sum)*float64(bl)/float64(oldest))
		x = max(x, start)
		for x > start && estimate(sum, oldest, bl, x-1) <= float64(lim) {
			x--
		}
		for x < bl && estimate(sum, oldest, bl, x) > float64(lim) {
			x++
		}
		if x < bl {
			return i*bl + x
		}
	}
	return (idx + n + 1) * bl // unreachable for cost ≤ capacity: every bucket has left
}

// ExpiresAt returns the instant (µs since the epoch) from which state is
// equivalent to a fresh key's at now or later, so a store may drop it; 0 for
// a state that is already fresh.
func (p *Policy) ExpiresAt(state []int64, now int64) int64 {
	var exp int64
	off := 0
	for _, l := range p.Limits {
		w := p.limitWords(l)
		st := state[off : off+w]
		off += w
		exp = max(exp, p.limitExpiresAt(l, st, now))
	}
	return exp
}

func (p *Policy) limitExpiresAt(l Limit, st []int64, now int64) int64 {
	w := int64(l.Window / time.Microsecond)
	switch p.Algorithm {
	case GCRA:
		return st[0]
	case TokenBucket:
		if st[1] == 0 {
			return 0
		}
		capa := effective(l.capacity(), p.SoftPercent)
		return st[1] + (capa-st[0])*EmissionInterval(l)
	case FixedWindow:
		if st[0]&fwCountMask == 0 {
			return 0
		}
		r := p.fixedWindow(l, st, now, 0, evalOnly)
		return now + r.resetAfter
	case SlidingWindowLog:
		var newest int64
		for _, v := range st[1:] {
			newest = max(newest, v)
		}
		if newest == 0 {
			return 0
		}
		return newest - 1 + w
	case SlidingWindowCounter:
		n := int64(p.buckets())
		for _, c := range st[1:] {
			if c != 0 {
				return (st[0] + n + 1) * (w / n)
			}
		}
	}
	return 0
}
