package core

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LimitSource gives the limits of one identity from the application's own
// data (a SQL table, a billing API, a map): it is asked, through a
// [Sourced], for the identity a request is limited by — the client key
// the rule's key function extracts (a user id from a verified claim, a
// tenant header; for keyfuncs.APIKey the key's hash, as it enters the
// store key). It returns the identity's limits and found true; found
// false (limits ignored) when the identity has no limits of its own, so
// that the rule's own limits apply; or an error when it could not tell
// (the database is down), so that the [SourceConfig]'s fallback applies.
//
// The limits must be valid under the rule's algorithm (see [Policy]): at
// least one and at most 8 (as a [Policy]); limits that are not are treated as an
// error. ctx carries the lookup's deadline ([SourceConfig].Timeout) and
// the values of the request that asked first; a source should honour it,
// but one that does not never holds a request past that deadline.
// It is called from a goroutine of its own, for at most one lookup of an
// identity at a time, and must be safe for concurrent use.
type LimitSource func(ctx context.Context, identity string) (limits []Limit, found bool, err error)

// Defaults of a [SourceConfig] field left zero.
const (
	defaultSourceTTL        = time.Minute
	defaultSourceTimeout    = 100 * time.Millisecond
	defaultSourceMaxEntries = 100_000
	// sourceErrTTL bounds how long a failed lookup's fallback is cached:
	// a source that is down is asked again at most once a second per
	// identity.
	sourceErrTTL = time.Second
	// maxSourceLookups bounds the lookups in flight at once (over all
	// identities): a miss beyond it falls back at once without asking
	// the source.
	maxSourceLookups = 64
	// maxLimitSets bounds the distinct limit sets a Sourced keeps a
	// Limiter (a policy on the store) for.
	maxLimitSets = 64
)

// SourceConfig configures a [Sourced]. The zero value is usable: every
// field has a default.
type SourceConfig struct {
	// TTL is how long an answer of the source (limits, or not found) is
	// used before the source is asked again: a limit changed in the
	// database applies within TTL, at once after [Sourced.Invalidate].
	// Measured on the default Limiter's clock. Default 1 minute. A failed
	// lookup's fallback is kept for at most 1 second.
	TTL time.Duration
	// Timeout bounds one lookup: a request waits at most Timeout (or its
	// context's deadline, if earlier) for the source, and then falls
	// back. Default 100ms.
	Timeout time.Duration
	// MaxEntries bounds the cached identities (found and not found),
	// least recently used evicted first, in 16 shards by the identity's
	// hash (a shard full evicts its own least recently used, so the
	// cache may evict before it holds MaxEntries; at least 16). Default
	// 100,000. One entry costs
	// about 100 bytes of heap plus the identity's length (115 bytes
	// for 16-byte identities, measured by TestSourceMemoryPerEntry):
	// 100,000 such identities take about 12 MB.
	MaxEntries int
	// FailModeOnError makes a failed or timed-out lookup decide by the
	// default policy's FailMode (open admits, closed denies, Degraded set)
	// instead of the default Limiter's own limits, which is what false,
	// the default, does. A policy with FailLocal always uses its own
	// limits.
	FailModeOnError bool
}

// Sourced gives each identity the limits a [LimitSource] has for it,
// and every other identity the default Limiter's. It is what
// httplimit.WithLimitSource runs per request; code that decides by hand
// calls Select(ctx, id).AllowN(ctx, key, cost).
//
// Answers are cached: at most MaxEntries identities, each for TTL (found
// or not found alike, so an attacker inventing identities costs one
// source call per identity and never more entries than MaxEntries);
// Invalidate and InvalidateAll drop them at once. Concurrent misses of
// one identity are one source call (the others wait for it); at most 64
// lookups run at once, and a miss beyond that falls back without asking.
// A request never waits beyond SourceConfig.Timeout or its own context.
//
// An identity's limits decide under a policy of their own: the default's
// policy with those limits, named "<default name>/<hash of the limits>".
// The state of a key is therefore kept per limit set. Through
// [Sourced.SelectKey] (what httplimit uses), an identity whose limits
// change has its key's use carried to the new limits on its first
// decision after the change; through Select it starts on the new limits
// with a fresh quota, and finds its state under the old limits again if
// they come back before it expires (docs/limit-sources.md tabulates both
// per algorithm). At most 64
// distinct limit sets are live; a set no cached identity uses is released
// (its state dropped) when a new one needs the room, and an identity
// whose set finds none falls back.
//
// Events go to the default Limiter's observer: an EventSource of each
// cache hit, lookup and fallback. A Sourced is safe for
// concurrent use; the zero value is not usable: build one with
// NewSourced.
type Sourced struct {
	def      *Limiter
	src      LimitSource
	failing  *Limiter // FailModeOnError: decides by the fail mode; else nil
	ttl      int64
	errTTL   int64
	timeout  time.Duration
	shards   [srcShards]srcShard
	gen      atomic.Uint64 // InvalidateAll
	inflight atomic.Int64
	waiting  atomic.Int64 // requests waiting for a lookup (tests read it)

	setsMu sync.Mutex
	sets   map[string]*limitSet
}

const srcShards = 16

type srcShard struct {
	mu    sync.Mutex
	m     map[string]*srcEntry
	head  srcEntry // sentinel of the LRU list: head.next is the most recent
	cap   int
	calls map[string]*srcCall
}

type srcEntry struct {
	id         string
	set        *limitSet // nil: the default's limits
	failed     bool      // the lookup failed: the fallback
	exp        int64     // clock nanoseconds; expired (or invalidated): asked again
	prev, next *srcEntry
	// carry is the identity's answer before this one when it chose
	// another Limiter: SelectKey carries the key's use from it once
	// (carry.lim nil: none). A failed entry keeps its predecessor's, for
	// the answer after it.
	carry carryFrom
}

// carryFrom is a Limiter an identity's use is to be carried from, and
// its limit set (nil for the default), whose reference it holds.
type carryFrom struct {
	lim *Limiter
	set *limitSet
}

type srcCall struct {
	done  chan struct{}
	set   *limitSet
	err   error
	stale bool // invalidated while under way: not cached
	gen   uint64
	prev  carryFrom // the expired entry's choice, handed to the new entry
}

type limitSet struct {
	key  string
	lim  *Limiter
	refs int // cached entries using it, under setsMu
}

// NewSourced returns the [Sourced] of the default Limiter def (its
// store, clock, timeout, observer and policy, whose limits an identity's
// limits replace) and source src, configured by cfg. It fails on a nil
// def or src and on negative durations or sizes.
func NewSourced(def *Limiter, src LimitSource, cfg SourceConfig) (*Sourced, error) {
	switch {
	case def == nil:
		return nil, errors.New("core: NewSourced: nil default Limiter; pass the Limiter of identities the source does not know")
	case src == nil:
		return nil, errors.New("core: NewSourced: nil LimitSource")
	case cfg.TTL < 0 || cfg.Timeout < 0 || cfg.MaxEntries < 0:
		return nil, fmt.Errorf("core: NewSourced: TTL %v, Timeout %v, MaxEntries %d: none may be negative (0 is the default)", cfg.TTL, cfg.Timeout, cfg.MaxEntries)
	}
	if cfg.TTL == 0 {
		cfg.TTL = defaultSourceTTL
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultSourceTimeout
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = defaultSourceMaxEntries
	}
	s := &Sourced{def: def, src: src, ttl: int64(cfg.TTL), errTTL: int64(min(cfg.TTL, sourceErrTTL)),
		timeout: cfg.Timeout, sets: map[string]*limitSet{}}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.m, sh.calls = map[string]*srcEntry{}, map[string]*srcCall{}
		sh.cap = max(1, cfg.MaxEntries/srcShards)
		if i < cfg.MaxEntries%srcShards {
			sh.cap++ // the shards' caps add up to MaxEntries
		}
		sh.head.next, sh.head.prev = &sh.head, &sh.head
	}
	if cfg.FailModeOnError && def.policy.FailMode != FailLocal {
		f, err := NewLimiter(sourceFailStore{}, *def.policy, def.derivedOpts()...)
		if err != nil {
			return nil, fmt.Errorf("core: NewSourced: %w", err)
		}
		f.log = storeLog{logger: def.log.logger, set: def.log.set, interval: def.log.interval}
		s.failing = f
	}
	return s, nil
}

func (l *Limiter) derivedOpts() []Option {
	return []Option{WithClock(l.clock), WithTimeout(l.timeout), WithObserver(l.observer)}
}

// errSourceFailed is the error the fail-mode Limiter's store returns.
var errSourceFailed = errors.New("limitkit: the limit source failed or timed out")

// sourceFailStore fails every Take: a failed lookup's decision by the
// policy's fail mode, through the Limiter's own fail-mode path.
type sourceFailStore struct{}

func (sourceFailStore) Take(context.Context, string, *Policy, time.Time, int64) (Decision, error) {
	return Decision{}, errSourceFailed
}

func (sourceFailStore) Local() bool { return true }

// Select returns the Limiter that decides identity's requests: the one of
// the limits the source has for it; the default Limiter when the source
// does not know it; on a failed or timed-out lookup the fallback (see
// [SourceConfig].FailModeOnError). It asks the source only on a miss
// (see [Sourced]). It never returns nil and never waits beyond the
// lookup timeout or ctx.
func (s *Sourced) Select(ctx context.Context, identity string) *Limiter {
	l, _ := s.selectCarry(ctx, identity, false)
	return l
}

// SelectKey is [Sourced.Select] for a decision on key (the store key of
// identity's requests): when identity's limits changed since this
// Sourced last chose a Limiter for it (its cached answer expired or was
// invalidated, and the source now answers other limits, or not found,
// or found where it had not), it first carries key's use from the
// previous Limiter to the new one, once per change. That costs a Usage
// of key under each (a store call each, one more per multi-limit
// policy) and, when the new one has less use, a Charge of the
// difference. What carries over, per algorithm and for several limits,
// and what does not (an answer evicted from the cache, a failed lookup
// between the two answers, a store without the quota verbs), is in
// docs/limit-sources.md. A carry that fails is skipped: the request is
// decided as without it. httplimit.WithLimitSource decides with it.
// Safe for concurrent use.
func (s *Sourced) SelectKey(ctx context.Context, identity, key string) *Limiter {
	l, from := s.selectCarry(ctx, identity, true)
	if from.lim != nil {
		s.carryUse(ctx, from.lim, l, key)
		s.unref(from.set)
	}
	return l
}

// selectCarry is Select; with take, it also takes (and clears) the
// identity's pending carry when the entry chose l.
func (s *Sourced) selectCarry(ctx context.Context, identity string, take bool) (*Limiter, carryFrom) {
	now := s.def.clock.Now().UnixNano()
	sh := s.shard(identity)
	sh.mu.Lock()
	var prev carryFrom
	if e := sh.m[identity]; e != nil {
		if now < e.exp {
			sh.touch(e)
			set, failed := e.set, e.failed
			var from carryFrom
			if take && !failed && e.carry.lim != nil {
				from, e.carry = e.carry, carryFrom{}
			}
			sh.mu.Unlock()
			if failed { // a lookup failed less than a second ago
				s.observe(ctx, "fallback", errSourceFailed, 0)
			} else {
				s.observe(ctx, "hit", nil, 0)
			}
			return s.limiterOf(set, failed), from
		}
		// expired or invalidated: its choice is what the next answer
		// carries from (a failed entry's, the one before it)
		if e.failed {
			prev, e.carry = e.carry, carryFrom{}
		} else {
			prev = carryFrom{lim: s.limiterOf(e.set, false), set: e.set}
			e.set = nil // its reference moves to prev
		}
		s.remove(sh, e)
	}
	c := sh.calls[identity]
	if c == nil {
		if s.inflight.Add(1) > maxSourceLookups {
			s.inflight.Add(-1)
			s.unref(prev.set)
			sh.mu.Unlock()
			s.observe(ctx, "fallback", errSourceBusy, 0)
			return s.limiterOf(nil, true), carryFrom{}
		}
		identity = strings.Clone(identity) // kept in the cache: not a view of the caller's buffer
		c = &srcCall{done: make(chan struct{}), gen: s.gen.Load(), prev: prev}
		sh.calls[identity] = c
		go s.lookup(context.WithoutCancel(ctx), sh, identity, c)
	} else {
		s.unref(prev.set) // a lookup is under way: it carries nothing (setsMu nests in sh.mu)
	}
	sh.mu.Unlock()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	var err error
	select {
	case <-c.done:
		if c.err == nil {
			l := s.limiterOf(c.set, false)
			var from carryFrom
			if take {
				sh.mu.Lock()
				if e := sh.m[identity]; e != nil && !e.failed && e.set == c.set && e.carry.lim != nil {
					from, e.carry = e.carry, carryFrom{}
				}
				sh.mu.Unlock()
			}
			return l, from
		}
		err = c.err
	case <-t.C:
		err = context.DeadlineExceeded
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.observe(ctx, "fallback", err, 0)
	return s.limiterOf(nil, true), carryFrom{}
}

// unref drops one reference to set (nil: none).
func (s *Sourced) unref(set *limitSet) {
	if set != nil {
		s.setsMu.Lock()
		set.refs--
		s.setsMu.Unlock()
	}
}

// errSourceBusy is the fallback's cause when too many lookups are under
// way.
var errSourceBusy = errors.New("limitkit: too many limit-source lookups under way")

func (s *Sourced) limiterOf(set *limitSet, failed bool) *Limiter {
	switch {
	case set != nil:
		return set.lim
	case failed && s.failing != nil:
		return s.failing
	}
	return s.def
}

// lookup asks the source for identity and settles c.
func (s *Sourced) lookup(parent context.Context, sh *srcShard, identity string, c *srcCall) {
	defer s.inflight.Add(-1)
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	start := time.Now()
	limits, found, err := s.callSource(ctx, identity)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // answered after its deadline: nobody waited for it
	}
	if err == nil && found {
		c.set, err = s.acquireSet(limits)
	}
	c.err = err
	n := 0
	if found {
		n = len(limits)
	}
	s.observe(ctx, "lookup", err, n, time.Since(start))
	ttl := s.ttl
	if err != nil {
		ttl = s.errTTL
	}
	exp := s.def.clock.Now().UnixNano() + ttl
	sh.mu.Lock()
	delete(sh.calls, identity)
	var drop [2]*limitSet // references released after sh.mu
	if !c.stale && c.gen == s.gen.Load() {
		if old := sh.m[identity]; old != nil {
			s.remove(sh, old)
		}
		e := &srcEntry{id: identity, set: c.set, failed: err != nil, exp: exp}
		if c.prev.lim != nil && (err != nil || c.prev.lim != s.limiterOf(c.set, false)) {
			e.carry = c.prev // the entry takes its reference
		} else {
			drop[0] = c.prev.set
		}
		sh.m[identity] = e
		sh.push(e) // the entry takes the lookup's reference to c.set
		for len(sh.m) > sh.cap {
			s.remove(sh, sh.head.prev)
		}
	} else {
		drop = [2]*limitSet{c.set, c.prev.set}
	}
	sh.mu.Unlock()
	s.unref(drop[0])
	s.unref(drop[1])
	close(c.done)
}

// callSource calls the source, turning a panic into an error: a source's
// bug must not take the process down from a goroutine nobody recovers.
func (s *Sourced) callSource(ctx context.Context, identity string) (limits []Limit, found bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			limits, found, err = nil, false, fmt.Errorf("limitkit: limit source panicked: %v", r)
		}
	}()
	return s.src(ctx, identity)
}

// acquireSet is the limit set of limits, built (a Limiter on the
// default's store) when it is not live yet, with one more reference.
func (s *Sourced) acquireSet(limits []Limit) (*limitSet, error) {
	if len(limits) == 0 || len(limits) > maxLimits {
		return nil, fmt.Errorf("core: limit source: %d limits, want 1 to %d", len(limits), maxLimits)
	}
	key := limitsKey(limits)
	s.setsMu.Lock()
	defer s.setsMu.Unlock()
	if set := s.sets[key]; set != nil {
		set.refs++
		return set, nil
	}
	if len(s.sets) >= maxLimitSets {
		freed := false
		for k, set := range s.sets {
			if set.refs == 0 {
				delete(s.sets, k)
				set.lim.Release()
				freed = true
				break
			}
		}
		if !freed {
			return nil, fmt.Errorf("core: limit source: %d distinct limit sets in use, at most %d", len(s.sets), maxLimitSets)
		}
	}
	p := *s.def.policy
	p.Limits = limits
	h := fnv.New64a()
	h.Write([]byte(key))
	base := p.Name
	if len(base) > 47 {
		base = base[:47]
	}
	p.Name = base + "/" + fmt.Sprintf("%016x", h.Sum64())
	l, err := NewLimiter(s.def.store, p, s.def.derivedOpts()...)
	if err != nil {
		return nil, err
	}
	l.log = storeLog{logger: s.def.log.logger, set: s.def.log.set, interval: s.def.log.interval}
	set := &limitSet{key: key, lim: l, refs: 1}
	s.sets[key] = set
	return set, nil
}

func limitsKey(limits []Limit) string {
	b := make([]byte, 0, 32*len(limits))
	for _, l := range limits {
		b = strconv.AppendInt(b, l.Requests, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(l.Window), 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, l.Burst, 10)
		b = append(b, ',')
	}
	return string(b)
}

// Invalidate drops identity's cached answer: its next request asks the
// source again (an admin changed its limit; [Sourced.SelectKey] carries
// the identity's use to its new limits). A lookup of identity under way
// when Invalidate is called is not cached.
func (s *Sourced) Invalidate(identity string) {
	sh := s.shard(identity)
	sh.mu.Lock()
	if e := sh.m[identity]; e != nil {
		e.exp = math.MinInt64 // expired: the next request asks, and carries from it
	}
	if c := sh.calls[identity]; c != nil {
		c.stale = true
	}
	sh.mu.Unlock()
}

// InvalidateAll drops every cached answer (limits changed in bulk); no
// lookup under way when it is called is cached.
func (s *Sourced) InvalidateAll() {
	s.gen.Add(1)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for e := sh.head.next; e != &sh.head; e = e.next {
			e.exp = math.MinInt64 // expired: the next request asks, and carries from it
		}
		sh.mu.Unlock()
	}
}

func (s *Sourced) shard(identity string) *srcShard {
	h := uint32(2166136261)
	for i := 0; i < len(identity); i++ {
		h = (h ^ uint32(identity[i])) * 16777619
	}
	return &s.shards[h%srcShards]
}

// remove unlinks e (under sh.mu) and drops its limit sets' references.
func (s *Sourced) remove(sh *srcShard, e *srcEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(sh.m, e.id)
	if e.set != nil || e.carry.set != nil {
		s.setsMu.Lock()
		if e.set != nil {
			e.set.refs--
		}
		if e.carry.set != nil {
			e.carry.set.refs--
		}
		s.setsMu.Unlock()
	}
}

func (sh *srcShard) push(e *srcEntry) {
	e.prev, e.next = &sh.head, sh.head.next
	sh.head.next.prev = e
	sh.head.next = e
}

func (sh *srcShard) touch(e *srcEntry) {
	if sh.head.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	sh.push(e)
}

func (s *Sourced) observe(ctx context.Context, what string, err error, n int, lat ...time.Duration) {
	o := s.def.observer
	if o == nil {
		return
	}
	e := Event{Kind: EventSource, Source: what, Context: ctx, Policy: s.def.policy.Name, Err: err, Keys: n}
	if len(lat) > 0 {
		e.Latency = lat[0]
	}
	o.Observe(e)
}

// Default returns the default Limiter NewSourced was given: the one
// Select returns for an identity the source does not know.
func (s *Sourced) Default() *Limiter { return s.def }

// carryUse carries key's use from Limiter from to Limiter to (see
// [Sourced.SelectKey]): each limit of to's policy whose window (or
// calendar period) one of from's limits has is matched with it, and to is
// charged the least, over the matched limits, of how much more from has
// used (at least 0): one charge adds to every limit alike, so a larger
// one would count use that never happened on the limit with the least
// difference. A limit of to with no match carries nothing. Failures
// (a store down, a store without the quota verbs, a degraded reading)
// skip the carry.
func (s *Sourced) carryUse(ctx context.Context, from, to *Limiter, key string) {
	uf, err := from.Usage(ctx, key)
	if err != nil || uf.Degraded || uf.Limits == nil {
		return
	}
	ut, err := to.Usage(ctx, key)
	if err != nil || ut.Degraded || ut.Limits == nil {
		return
	}
	if n := carryCost(uf.Limits, ut.Limits); n > 0 {
		_, _ = to.Charge(ctx, key, n)
	}
}

// carryCost is the cost to charge the limits whose usage is to so that
// none counts more than it used plus what the matching limit of from
// used beyond it (see carryUse); 0 when no limit matches.
func carryCost(from, to []Usage) int64 {
	n, matched := int64(math.MaxInt64), false
	for _, t := range to {
		for _, f := range from {
			if sameWindow(f.Limit, t.Limit) {
				n, matched = min(n, max(f.Used-t.Used, 0)), true
				break
			}
		}
	}
	if !matched {
		return 0
	}
	return n
}

// sameWindow reports whether a and b count over the same window: the
// same duration, or the same calendar period in the same zone.
func sameWindow(a, b Limit) bool {
	a.Requests, a.Burst, b.Requests, b.Burst = 1, 0, 1, 0
	return sameLimit(a, b)
}
