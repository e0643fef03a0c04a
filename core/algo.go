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

// write modes of a per-limit step. In every mode, each algorithm first
// normalizes a state that only a clock gone back can leave (a tat beyond
// now + 2×tau, a refill instant more than tokens × T + tau after now, a
// window more than one window or a bucket more than a window after now's,
// log entries stamped more than a window after now) into the nearest state the policy could
// have written at now: that consumes nothing, and it keeps RetryAfter
// exact and never longer than twice what the policy allows (two full
// refills or windows). A clock stepped back by D thus never locks a key
// out for D. Smaller distances stay in force, because concurrent callers
// routinely reach a state in another order than they read the clock, and
// normalizing their instants would hand quota back at every such race. The price, when servers whose clocks
// differ by D share keys under a client-supplied time, is that a key used
// alternately from both may get up to D of refill (at most a full bucket
// or window) at each switch from the slow clock to the fast one, as
// golang.org/x/time/rate does with out-of-order times: shared stores should
// decide on one clock (the Redis store's default, the server's TIME).
const (
	evalOnly    = iota // compute the outcome, consume nothing (but normalize, see above)
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

// For store implementers: Compiled is a validated Policy with every
// per-limit constant worked out
// once (window and bucket lengths in µs, emission interval, effective
// capacity): what stores hold on their hot path. Build it with
// [Policy.Compile]; it is immutable and safe for concurrent use.
type Compiled struct {
	p      Policy
	limits []plan
	el     []plan // the limits raised to the elastic ceiling; nil without Policy.Elastic
	words  int
}

// plan is one limit's constants, in µs and cost units.
type plan struct {
	l       Limit
	w       int64 // window
	t       int64 // emission interval (GCRA, token bucket)
	capa    int64 // effective capacity (soft overage included)
	soft    int64 // capa − nominal capacity
	tau     int64 // GCRA tolerance capa × t
	tauMax  int64 // GCRA: the largest tolerance any plan of the policy uses (the elastic one's): bounds normalization
	debt    int64 // token bucket: tokens this plan may overdraw (the elastic plan's ceiling − capacity; else 0)
	debtMax int64 // token bucket: the overdraft any plan of the policy allows: bounds normalization
	n       int64 // sliding counter buckets
	bl      int64 // sliding counter bucket length
	off, sz int   // state words
}

// For store implementers: Compile validates p and returns its compiled
// form ([Compiled]), which a store builds once per policy. p is copied.
func (p *Policy) Compile() (*Compiled, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &Compiled{p: *p}
	c.p.Limits = append([]Limit(nil), p.Limits...)
	for _, l := range c.p.Limits {
		k := plan{l: l, w: int64(l.Window / time.Microsecond), t: EmissionInterval(l), n: int64(p.buckets())}
		k.capa = effective(l.capacity(), p.SoftPercent)
		k.soft = k.capa - l.capacity()
		k.tau = k.capa * k.t
		k.tauMax = k.tau
		ceil := k.capa
		if p.Elastic != nil {
			ceil = p.Elastic.ceiling(k.capa)
			k.tauMax = ceil * k.t
			k.debtMax = ceil - k.capa
		}
		k.bl = k.w / k.n
		k.off = c.words
		switch p.Algorithm {
		case TokenBucket:
			k.sz = 2
		case SlidingWindowLog:
			k.sz = 1 + int(ceil) // the ring holds the elastic ceiling
		case SlidingWindowCounter:
			k.sz = 2 + int(k.n)
		default:
			k.sz = 1
		}
		c.words += k.sz
		c.limits = append(c.limits, k)
	}
	if p.Elastic != nil {
		c.el = make([]plan, len(c.limits))
		for i, k := range c.limits {
			e := k
			if p.Algorithm == TokenBucket {
				// the bucket refills to its capacity as before, and may be
				// overdrawn down to −(ceiling − capacity)
				e.debt = k.debtMax
			} else {
				e.capa = k.capa + k.debtMax
				e.soft = e.capa - k.capa // nominal() then reports the nominal remaining
				e.tau = e.capa * e.t
			}
			c.el[i] = e
		}
	}
	return c, nil
}

// For store implementers: Policy returns the compiled policy. Do not
// modify it.
func (c *Compiled) Policy() *Policy { return &c.p }

// For store implementers: StateWords is the number of int64 words of
// per-key state the policy needs.
func (c *Compiled) StateWords() int { return c.words }

// For store implementers: StateWords is the number of int64 words of
// per-key state p needs; 0 for an invalid policy.
func (p *Policy) StateWords() int {
	c, err := p.Compile()
	if err != nil {
		return 0
	}
	return c.words
}

// For store implementers (and tests): Decide is Compile followed by
// Compiled.Decide, for one-off use; stores compile once. It panics on an
// invalid policy. Applications decide through a [Limiter].
func (p *Policy) Decide(state []int64, now, cost int64) Decision {
	c, err := p.Compile()
	if err != nil {
		panic(err)
	}
	return c.Decide(state, now, cost)
}

// For store implementers: ExpiresAt is Compile followed by
// Compiled.ExpiresAt; 0 for an invalid policy.
func (p *Policy) ExpiresAt(state []int64, now int64) int64 {
	c, err := p.Compile()
	if err != nil {
		return 0
	}
	return c.ExpiresAt(state, now)
}

// For store implementers: Decide applies cost at now (µs since the Unix
// epoch) to state, a key's
// state (len(state) == StateWords(); all zero for a new key), and returns
// the decision. It updates state in place when the request consumes quota:
// when allowed, or when denied under CountDenied. A multi-limit decision is
// all-or-nothing. Decide is pure apart from state; the caller serializes
// calls per key. cost < 0 is treated as 0 (a peek that consumes nothing);
// now is clamped to [0, MaxNow]. A cost above a limit's capacity is denied
// with RetryAfter Never in O(1) whatever its size (the arithmetic never
// overflows): it consumes nothing, or under CountDenied a full bucket or
// window, exactly as a cost of capacity + 1 would.
//
// A state that only a clock gone back can leave (a GCRA tat beyond
// now + 2 × capacity × T, a window, bucket or log entry more than a window
// after now) is first normalized, in place and in every call (a peek
// included), into the nearest state the policy could have written at now;
// nearer states stay in force (concurrent callers reach a state in another
// order than they read the clock). No decision ever asks for a wait longer
// than twice what the policy allows (two full refills or windows, and a
// bucket for the sliding counter), so a clock stepped back, or corrected
// after running fast, never locks a key out. The price:
// if callers sharing state pass instants from clocks that differ by D and
// alternate on one key, each switch from the slower clock to the faster
// may grant up to D of refill (at most a full bucket or window), as
// golang.org/x/time/rate does for out-of-order instants. Decide on one
// clock where state is shared.
func (c *Compiled) Decide(state []int64, now, cost int64) (d Decision) {
	c.DecideTo(&d, state, now, cost)
	return d
}

// For store implementers: DecideTo is Decide writing the decision into
// *d, which it overwrites
// whole: a store's hot path then copies no Decision.
func (c *Compiled) DecideTo(d *Decision, state []int64, now, cost int64) {
	*d = Decision{}
	if cost < 0 {
		cost = 0
	}
	now = min(max(now, 0), MaxNow)
	mode := writeIfOK
	if c.p.CountDenied {
		mode = writeAlways
	}
	if len(c.limits) == 1 {
		k := &c.limits[0]
		r := c.step(k, state[:k.sz], now, cost, mode)
		c.decision(d, k, r)
		if !r.ok && c.el != nil {
			d.ElasticRoom = c.room(state, now, cost)
		}
		return
	}
	// Pass 1 evaluates every limit; pass 2 consumes in all of them only
	// when all allow (or when denied requests count).
	var bind *plan
	var br lres
	allOK := true
	for i := range c.limits {
		k := &c.limits[i]
		r := c.step(k, state[k.off:k.off+k.sz], now, cost, evalOnly)
		if bind == nil || binds(r, br, k, bind) {
			bind, br = k, r
		}
		allOK = allOK && r.ok
	}
	if allOK || c.p.CountDenied {
		for i := range c.limits {
			k := &c.limits[i]
			r := c.step(k, state[k.off:k.off+k.sz], now, cost, writeAlways)
			if k == bind {
				br.resetAfter = r.resetAfter
			}
		}
	}
	c.decision(d, bind, br)
	if !allOK && c.el != nil {
		d.ElasticRoom = c.room(state, now, cost)
	}
}

// decideN is DecideTo's multi-limit decision over plans ks (the elastic
// ones; DecideTo keeps its own copy of the loop on the hot path): pass 1
// evaluates every limit; pass 2 consumes in all of them only when all
// allow. over reports whether an admitted request took a limit beyond its
// nominal capacity (a remaining count below the plan's soft margin).
func (c *Compiled) decideN(d *Decision, ks []plan, state []int64, now, cost int64) (over, allOK bool) {
	var bind *plan
	var br lres
	allOK = true
	for i := range ks {
		k := &ks[i]
		r := c.step(k, state[k.off:k.off+k.sz], now, cost, evalOnly)
		if bind == nil || binds(r, br, k, bind) {
			bind, br = k, r
		}
		allOK = allOK && r.ok
		over = over || r.remaining < k.soft
	}
	if allOK || c.p.CountDenied {
		for i := range ks {
			k := &ks[i]
			r := c.step(k, state[k.off:k.off+k.sz], now, cost, writeAlways)
			if k == bind {
				br.resetAfter = r.resetAfter
			}
		}
	}
	c.decision(d, bind, br)
	return over && allOK, allOK
}

// binds reports whether outcome a (of limit ka) is more binding than b.
func binds(a, b lres, ka, kb *plan) bool {
	if a.ok != b.ok {
		return !a.ok
	}
	if !a.ok {
		if b.retryAfter == never {
			return false
		}
		return a.retryAfter == never || a.retryAfter > b.retryAfter
	}
	ra, rb := nominal(a.remaining, ka), nominal(b.remaining, kb)
	return ra < rb || ra == rb && a.resetAfter > b.resetAfter
}

// nominal converts a remaining count against the effective capacity to one
// against the nominal capacity (soft overage is not advertised).
func nominal(rem int64, k *plan) int64 {
	return max(0, rem-k.soft)
}

func (c *Compiled) decision(d *Decision, k *plan, r lres) {
	d.Allowed = r.ok
	d.Limit = k.l
	d.ResetAfter = time.Duration(r.resetAfter) * time.Microsecond
	d.Policy = c.p.Name
	if r.ok {
		d.Remaining = nominal(r.remaining, k)
		return
	}
	if r.retryAfter == never {
		d.RetryAfter = Never
	} else {
		d.RetryAfter = time.Duration(r.retryAfter) * time.Microsecond
	}
	if c.p.Shadow {
		d.Allowed, d.Shadowed = true, true
	}
}

// For store implementers: MaxNow is the latest instant Decide works
// with, in µs since the Unix
// epoch (2^52 µs, in the year 2112): later instants are decided as MaxNow,
// so that every instant plus any span the policy allows stays below 2^53,
// exact in the doubles of Redis's Lua and far from int64 overflow.
const MaxNow = 1 << 52

func (c *Compiled) step(k *plan, st []int64, now, cost int64, mode int) lres {
	// Every cost above the capacity decides as capacity + 1 (denied, never
	// retryable, the same capped state written under CountDenied), so no
	// product or sum below involves more than 2^31 units.
	cost = min(cost, k.capa+k.debt+1)
	switch c.p.Algorithm {
	case TokenBucket:
		return tokenBucket(k, st, now, cost, mode)
	case FixedWindow:
		return fixedWindow(k, st, now, cost, mode)
	case SlidingWindowLog:
		return slidingLog(k, st, now, cost, mode)
	case SlidingWindowCounter:
		return slidingCounter(k, st, now, cost, mode)
	}
	return gcra(k, st, now, cost, mode)
}

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

const (
	fwCountBits = 31
	fwCountMask = 1<<fwCountBits - 1
)

// fixedWindow: state [(index mod 2^33) << 31 | count]. Windows are aligned
// to the epoch: index = now / W. The window after now's stays in force (a
// caller that read the clock just before a concurrent one rolled the
// window over decides in that window). A stored window further ahead (the
// clock went back) has its count carried into now's window: a clock jump
// never resets a count, and never makes a client wait beyond the end of
// the next window.
func fixedWindow(k *plan, st []int64, now, cost int64, mode int) lres {
	w, capa := k.w, k.capa
	idx := now / w
	count := st[0] & fwCountMask
	if count != 0 {
		stored := uint64(st[0]) >> fwCountBits
		// signed difference of the 33-bit indexes
		if diff := int64((uint64(idx)-stored)<<fwCountBits) >> fwCountBits; diff > 0 {
			count = 0
		} else if diff == -1 {
			// the next window: a caller that read the clock just before a
			// concurrent one rolled the window over; it stays in force
			// (carrying its count back would hand the window's quota out
			// again)
			idx++
		} else if diff < -1 {
			st[0] = int64(uint64(idx)<<fwCountBits) | count
		}
	}
	end := (idx + 1) * w
	if count+cost <= capa {
		if mode != evalOnly && cost > 0 {
			st[0] = int64(uint64(idx)<<fwCountBits) | (count + cost)
		}
		return lres{ok: true, remaining: capa - count - cost, resetAfter: end - now}
	}
	r := lres{remaining: capa - count, resetAfter: end - now, retryAfter: end - now}
	if cost > capa {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0] = int64(uint64(idx)<<fwCountBits) | min(count+cost, capa)
	}
	return r
}

// slidingLog: state [head, ring of C slots]. A slot holds an admitted unit's
// timestamp + 1 (0 = empty); head is the oldest slot, the next to write.
// Timestamps are written as max(now, newest), so the ring is sorted from
// head on. Entries stamped more than a window after now (the clock went
// back) are restamped now first; nearer ones stay (a caller that read the
// clock before a concurrent one). A unit stamped ts is inside the window at now while
// ts > now − W; the request is admitted when the units inside plus cost
// fit C. A decision reads O(log C) slots and writes cost (at most C) of
// them.
func slidingLog(k *plan, st []int64, now, cost int64, mode int) lres {
	w, capa := k.w, k.capa
	ring := st[1:]
	c := int64(len(ring)) // the capacity, or an elastic policy's ceiling
	head := st[0]
	at := func(i int64) int64 { return ring[(head+i)%c] } // i-th oldest
	// first ring position whose value is > v (c when none)
	search := func(v int64) int64 {
		lo, hi := int64(0), c
		for lo < hi {
			m := int64(uint64(lo+hi) >> 1)
			if at(m) > v {
				hi = m
			} else {
				lo = m + 1
			}
		}
		return lo
	}
	if at(c-1)-1-now > w {
		i := search(now + 1)
		fillRing(ring, (head+i)%c, c-i, now+1)
	}
	lo := search(max(now-w+1, 0)) // stored values > cut are inside; empty slots (0) never are
	in := c - lo
	newest := max(at(c-1)-1, 0) // 0 only when the ring is empty
	stamp := max(now, newest)
	if in+cost <= capa {
		if mode != evalOnly && cost > 0 {
			fillRing(ring, head, cost, stamp+1)
			st[0] = (head + cost) % c
		}
		r := lres{ok: true, remaining: capa - in - cost}
		if cost > 0 {
			r.resetAfter = stamp + w - now
		} else if in > 0 {
			r.resetAfter = newest + w - now
		}
		return r
	}
	r := lres{remaining: max(0, capa-in), retryAfter: never}
	if in > 0 {
		// (none inside: a cost above the capacity on a full key, whose
		// stale entries must not make ResetAfter negative)
		r.resetAfter = newest + w - now
	}
	if cost <= capa {
		// the (in+cost−C)-th unit inside the window, from the oldest, must leave
		r.retryAfter = at(lo+in+cost-capa-1) - 1 + w - now
	}
	if mode == writeAlways {
		n := min(cost, capa)
		fillRing(ring, head, n, stamp+1)
		st[0] = (head + n) % c
		r.resetAfter = stamp + w - now
	}
	return r
}

// fillRing sets n (at most len(ring)) slots of ring from slot j on,
// wrapping, to v.
func fillRing(ring []int64, j, n, v int64) {
	a := min(n, int64(len(ring))-j)
	for i := range ring[j : j+a] {
		ring[j+int64(i)] = v
	}
	for i := range ring[:n-a] {
		ring[i] = v
	}
}

// counter reads the sliding counter's buckets: bucket j lives in slot
// j mod (N+1) while j is one of the N+1 latest buckets up to cur.
type counter struct {
	counts     []int64
	cur, slots int64
}

func (c *counter) bucket(j int64) int64 {
	if j > c.cur || j <= c.cur-c.slots || j < 0 {
		return 0
	}
	return c.counts[j%c.slots]
}

// sum of buckets i−N+1..i and the oldest, bucket i−N.
func (c *counter) window(i, n int64) (sum, oldest int64) {
	for j := i - n + 1; j <= i; j++ {
		sum += c.bucket(j)
	}
	return sum, c.bucket(i - n)
}

// slidingCounter: state [cur, N+1 counts]. Buckets last L = W/N; bucket i
// covers [i×L, (i+1)×L). At now, in bucket i with e = now − i×L elapsed, the
// estimate of the cost in the last W is
//
//	(sum of buckets i−N+1..i) + bucket(i−N) × ((L − e) / L)
//
// in float64, in exactly that order (see estimate). Admitted when
// estimate ≤ capacity − cost. A decision reads O(N) counts (N ≤
// maxBuckets). A stored current bucket up to a window after now's (a
// caller that read the clock before a concurrent one) is where the
// decision is made, at its start. One further ahead (the clock went back)
// is first moved back to now's, the whole window with it: the counts keep
// their order and leave the window as now advances.
func slidingCounter(k *plan, st []int64, now, cost int64, mode int) lres {
	n, bl, capa := k.n, k.bl, k.capa
	ctr := counter{counts: st[1:], cur: st[0], slots: n + 1}
	idx := now / bl
	e := now - idx*bl
	if idx < ctr.cur && ctr.cur-idx <= n {
		// a caller that read the clock before a concurrent one moved to a
		// later bucket: decide at the start of the stored current bucket
		idx, e = ctr.cur, 0
	} else if idx < ctr.cur {
		// bucket j moves to j − d: slot i takes the count of slot i + d
		rotate(ctr.counts, (ctr.cur-idx)%ctr.slots)
		st[0], ctr.cur = idx, idx
	}
	sum, oldest := ctr.window(idx, n)
	est := estimate(sum, oldest, bl, e)
	lim := capa - cost
	var r lres
	if est <= float64(lim) {
		r = lres{ok: true, remaining: max(0, int64(math.Floor(float64(capa)-(est+float64(cost)))))}
	} else {
		r = lres{remaining: max(0, int64(math.Floor(float64(capa)-est))), retryAfter: never}
		if cost <= capa {
			r.retryAfter = counterRetry(&ctr, idx, e, n, bl, lim, sum) - now
		}
	}
	write := mode == writeAlways || mode == writeIfOK && r.ok
	add := cost
	if !r.ok {
		add = min(cost, capa)
	}
	if write && add > 0 {
		if idx != ctr.cur {
			// roll forward: clear the slots of buckets cur+1..idx
			for j := max(ctr.cur+1, idx-n); j <= idx; j++ {
				ctr.counts[j%ctr.slots] = 0
			}
			st[0], ctr.cur = idx, idx
		}
		if r.ok {
			ctr.counts[idx%ctr.slots] += add
		} else {
			ctr.counts[idx%ctr.slots] = min(ctr.counts[idx%ctr.slots]+add, capa)
		}
	}
	// reset: the newest bucket holding cost leaves the window at (j+N+1)×L
	if r.ok && cost > 0 || write && add > 0 {
		r.resetAfter = (idx+n+1)*bl - now
	} else {
		for j := idx; j >= idx-n; j-- {
			if ctr.bucket(j) != 0 {
				r.resetAfter = (j+n+1)*bl - now
				break
			}
		}
	}
	return r
}

// rotate moves a[r:] to the front of a, in place.
func rotate(a []int64, r int64) {
	reverse(a[:r])
	reverse(a[r:])
	reverse(a)
}

func reverse(a []int64) {
	for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
		a[i], a[j] = a[j], a[i]
	}
}

// estimate is the sliding counter's weighted sum; the Lua port computes
// sum + oldest * ((L - e) / L) with the same roundings.
func estimate(sum, oldest, bl, e int64) float64 {
	w := float64(float64(bl-e) / float64(bl))
	return float64(sum) + float64(float64(oldest)*w)
}

// counterRetry returns the earliest instant (µs) at or after bucket idx,
// offset e, at which the estimate is at most lim if nothing more is
// consumed. The estimate only falls as time passes, so the instant is found
// segment by segment (one bucket length each) and, inside the segment,
// by solving the linear term and correcting the float rounding. sum is the
// window sum at idx; each later segment's sum is kept up to date by adding
// the bucket that enters and removing the one that leaves, so the search
// is O(N), not O(N²).
func counterRetry(c *counter, idx, e, n, bl, lim, sum int64) int64 {
	for i := idx; i <= idx+n+1; i++ {
		if i > idx {
			sum += c.bucket(i) - c.bucket(i-n)
		}
		if sum > lim {
			continue
		}
		oldest := c.bucket(i - n)
		start := int64(0)
		if i == idx {
			start = e
		}
		if estimate(sum, oldest, bl, start) <= float64(lim) {
			return i*bl + start
		}
		// oldest × (L − x)/L ≤ lim − sum  ⇔  x ≥ L − (lim − sum)×L/oldest
		x := max(start, bl-int64(float64(lim-sum)*float64(bl)/float64(oldest)))
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
	return (idx + n + 1) * bl // not reached for cost ≤ capacity
}

// For store implementers: ExpiresAt returns the instant (µs since the
// epoch) from which state is
// equivalent to a fresh key's, so a store may drop it (or let a TTL end
// it); 0 for a fresh state. now disambiguates the fixed window's index.
func (c *Compiled) ExpiresAt(state []int64, now int64) int64 {
	var exp int64
	for i := range c.limits {
		k := &c.limits[i]
		exp = max(exp, c.limitExpiresAt(k, state[k.off:k.off+k.sz], now))
	}
	return exp
}

func (c *Compiled) limitExpiresAt(k *plan, st []int64, now int64) int64 {
	switch c.p.Algorithm {
	case GCRA:
		return st[0]
	case TokenBucket:
		if st[1] == 0 {
			return 0
		}
		return st[1] + (k.capa-st[0])*k.t
	case FixedWindow:
		if st[0]&fwCountMask == 0 {
			return 0
		}
		// the stored window's end: its index is now's minus the 33-bit difference
		idx := now / k.w
		diff := int64((uint64(idx)-uint64(st[0])>>fwCountBits)<<fwCountBits) >> fwCountBits
		return (idx - diff + 1) * k.w
	case SlidingWindowLog:
		ring := st[1:]
		newest := ring[(st[0]+int64(len(ring))-1)%int64(len(ring))]
		if newest == 0 {
			return 0
		}
		return newest - 1 + k.w
	case SlidingWindowCounter:
		for _, v := range st[1:] {
			if v != 0 {
				return (st[0] + k.n + 1) * k.bl
			}
		}
	}
	return 0
}
