package core

import "time"

// The algorithms' math, shared by every store: compilation and dispatch
// in this file, GCRA and the token bucket in algo_rate.go, the fixed
// window, the sliding log and the sliding counter in algo_window.go. All of it
// works on whole microseconds since the Unix epoch (int64) and integer
// counts below 2^31, so that a Lua port running on doubles (Redis) computes
// bit-identical results; the one floating-point formula (the sliding
// counter's weighted estimate) is written with explicit conversions so the
// compiler cannot fuse it, and in the same order as the Lua port.
//
// Per-key state is a []int64 of Compiled.StateWords() words, zero meaning
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
	w       int64     // window
	t       int64     // emission interval (GCRA, token bucket)
	capa    int64     // effective capacity (soft overage included)
	soft    int64     // capa − nominal capacity
	tau     int64     // GCRA tolerance capa × t
	tauMax  int64     // GCRA: the largest tolerance any plan of the policy uses (the elastic one's): bounds normalization
	debt    int64     // token bucket: tokens this plan may overdraw (the elastic plan's ceiling − capacity; else 0)
	debtMax int64     // token bucket: the overdraft any plan of the policy allows: bounds normalization
	cal     *calendar // a calendar limit's boundaries (fixed window); nil for a duration window
	n       int64     // sliding counter buckets
	bl      int64     // sliding counter bucket length
	off, sz int       // state words
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
		if l.cal != nil {
			k.cal = newCalendar(l)
		}
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
		idx := k.index(now)
		diff := int64((uint64(idx)-uint64(st[0])>>fwCountBits)<<fwCountBits) >> fwCountBits
		return k.end(idx - diff)
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
