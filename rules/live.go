package rules

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/limitkit/limitkit/core"
)

// Live is a rule set that can be replaced while it serves: the rules, one
// [core.Limiter] per rule and descriptor, and one value of type H per rule
// built from them (typically the adapter middleware that applies the
// rule's limiter, say a func(http.Handler) http.Handler), swapped as one
// [Snapshot] behind an atomic pointer.
//
// A request calls [Live.Acquire] once, matches, decides and responds with
// the Snapshot it got, and calls [Snapshot.Release] at the end: whatever
// [Live.Swap] does meanwhile, it is decided wholly by one set, including a
// decision that consults several of the set's limiters (a hybrid of user
// and IP). The new set serves every request that acquires after Swap
// returns; the old one finishes the requests already under way.
//
// # State across a swap
//
// Swap matches the old and new set's policies by name (a rule's name; a
// descriptor's domain/key):
//
//   - Same name, equal policy (every core.Policy field): the old Limiter is
//     kept, and with it every key's state, exactly. Changes to a rule's
//     route, methods, identity or key do not touch its policy.
//   - Same name, same limits (algorithm, limits, buckets, soft_percent,
//     count_denied, shadow, elastic ceiling) but other settings (fail_mode, mode, sync,
//     fleet_size): a new Limiter on the same state, kept exactly (the
//     stores key state by policy name and limits).
//   - Same name, other limits: a new Limiter. A limit's state is carried
//     over only where it means the same thing under the new rule; it is
//     never rescaled (a GCRA arrival time or a token count written under
//     one rate would over- or under-admit under another). On the embedded
//     store (memstore), whose table holds all of a policy's limits
//     together, the rule starts afresh: every key has its full quota under
//     the new limits. On Redis, whose keys carry a digest of each limit's
//     parameters (core/redisstore, "Keys"), a limit that is unchanged at
//     the same position under the same algorithm, buckets and
//     soft_percent keeps its state, and every other limit starts afresh;
//     the old keys expire by their TTL (at most their window). The fleet
//     tier follows its remote store; write-back quota leased under the
//     old limits is synced as usual.
//   - A removed rule's Limiter is released (core.Limiter.Release) once the
//     last request of the snapshots that use it is done: memstore then
//     drops the rule's table; on Redis its keys expire by their TTL. A
//     rule added back later starts afresh on memstore, and on Redis finds
//     what is left.
//
// On a store that registers policy names ([storekit.PolicyRegistrar]:
// memstore, redisstore, the fleet tier) every Limiter of a snapshot is
// registered, and a rebuilt rule takes its name over from the older
// snapshots' Limiters of that name ([core.Replacing]); so a rules set
// whose name another live Limiter on the store uses with other limits is
// refused by NewLive and Swap, and reloads that change limits, elastic
// capacities or names leave the store's policy count and the heap flat
// (the capacity limits no set uses any more are released too). A store
// that does not register policies but keeps one table per policy name and
// refuses a same-named policy of other limits implements memstore.Store's
// Replace and Forget (the same signatures; see tableStore); Swap then uses them to give a changed rule its new table while requests
// under the old rule finish on the old one.
//
// A superseded Snapshot, its Limiters and on memstore the tables set
// aside for it live until its last request releases it: a request that
// holds its snapshot for long (a stream) keeps them, and one that never
// releases it keeps them for good.
//
// The zero Live is not usable; build one with [NewLive]. A Live is safe
// for concurrent use; Swaps are serialized. Acquire and Release cost two
// atomic operations on a counter every request shares.
type Live[H any] struct {
	store core.Store
	opts  []core.Option
	build func(*Rule, Limiters) (H, error)
	cur   atomic.Pointer[Snapshot[H]]

	mu  sync.Mutex            // serializes Swap and the bookkeeping of old snapshots
	old map[*Snapshot[H]]bool // superseded snapshots with requests under way
	gen uint64                // under mu
}

// tableStore is implemented by stores that hold one table of state per
// policy name and refuse a policy whose name is taken by other limits
// (memstore.Store). A store that is also a [storekit.PolicyRegistrar] (as
// memstore is) is not called through it: registration does the same. For
// other stores, [Live.Swap] calls Replace for every policy it rebuilt,
// listing as in flight the same-named policies that older snapshots still
// use, before it publishes the new set; and Forget with a superseded
// snapshot's policies once its last request has released it. See
// memstore.Store.Replace for the contract.
type tableStore interface {
	Replace(p *core.Policy, inflight ...*core.Policy) (bool, error)
	Forget(policies ...*core.Policy)
}

// Snapshot is one rule set of a [Live] with its limiters and per-rule
// values, as a request sees it from [Live.Acquire] to [Snapshot.Release].
// It is immutable and safe for concurrent use.
type Snapshot[H any] struct {
	set      *Set
	gen      uint64
	limiters []*core.Limiter     // Set.Policies() order: rules, then descriptors, then the rules' added policies
	extra    []int               // by rule index: where its added policies start in limiters
	handlers []H                 // by rule index
	conc     []*core.Concurrency // by rule index: concurrency:'s limit, or nil (concurrency.go)
	refs     atomic.Int64        // requests under way, plus 1 while current
	live     *Live[H]
}

// NewLive builds the first Snapshot of set: a Limiter per rule and
// descriptor on store with opts (a clock, an observer, a logger), and
// build(rule, limiters) per rule (nil build: the zero H). limiters are
// every limiter of the rule ([Limiters]): its own (Limiters.Default) and
// those of the policies it adds (tiers, overrides, also: checks), which
// keep their state across swaps as a rule's own does (matched by policy
// name; see [Live]). Errors from core.NewLimiter and build are returned
// with the rule's name. On a store that replaces policy tables (memstore)
// it registers every policy's table (replacing a table of another
// configuration under one of the names: one store, one Live per policy
// name).
func NewLive[H any](store core.Store, set *Set, build func(*Rule, Limiters) (H, error), opts ...core.Option) (*Live[H], error) {
	return newLive(store, set, build, opts)
}

func newLive[H any](store core.Store, set *Set, build func(*Rule, Limiters) (H, error), opts []core.Option) (*Live[H], error) {
	if store == nil {
		return nil, fmt.Errorf("rules: NewLive: nil store; pass the store the limiters share (memstore.MustNew() for the embedded one)")
	}
	if set == nil {
		return nil, fmt.Errorf("rules: NewLive: nil set; load one with LoadFile or use Default()")
	}
	l := &Live[H]{store: store, opts: slices.Clone(opts), build: build, old: map[*Snapshot[H]]bool{}}
	s, _, built, err := l.compile(set, nil)
	if err != nil {
		return nil, err
	}
	if r, ok := tableReplacer(store); ok {
		// Register every table now, so that each name a snapshot uses
		// has one when a later Swap replaces it.
		for _, p := range built {
			if _, err := r.Replace(p); err != nil {
				return nil, fmt.Errorf("rules: policy %q: %w", p.Name, err)
			}
		}
	}
	l.gen = 1
	s.gen = 1
	s.refs.Store(1)
	l.cur.Store(s)
	return l, nil
}

// Acquire returns the current Snapshot, which the caller must Release
// exactly once when the request is done with it (typically deferred).
// It never blocks: a Swap publishes a new Snapshot without waiting.
func (l *Live[H]) Acquire() *Snapshot[H] {
	for {
		s := l.cur.Load()
		n := s.refs.Load()
		// n == 0: s was superseded and its last request released it;
		// l.cur has moved on, load it again.
		if n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s
		}
	}
}

// Current returns the rule set serving new requests, for display; a
// request uses [Live.Acquire].
func (l *Live[H]) Current() *Set { return l.cur.Load().set }

// Generation counts the sets published: 1 for NewLive's, plus one per
// successful Swap.
func (l *Live[H]) Generation() uint64 { return l.cur.Load().gen }

// ReloadFile loads path with [LoadFile] and swaps it in. A file that does
// not load is rejected with LoadFile's error (every problem, with its
// line) and the current set keeps serving. The new set gets the capacity
// signals the current set was given with [Set.WithSignals], so elastic
// rules stay elastic (and an unchanged one keeps its Limiter); a set
// passed to [Live.Swap] must carry its own.
func (l *Live[H]) ReloadFile(path string) (Change, error) {
	set, err := LoadFile(path)
	if err != nil {
		return Change{}, err
	}
	// WithSignals under l.mu: a snapshot draining meanwhile must see the
	// capacity limits it builds as used (see Signals.retain)
	l.mu.Lock()
	if sig := l.cur.Load().set.sig; sig != nil {
		if set, err = set.WithSignals(sig); err != nil {
			l.mu.Unlock()
			return Change{}, fmt.Errorf("rules: %s: %w", path, err)
		}
	}
	return l.swapLocked(set)
}

// Swap makes set the one new requests get, keeping state as described in
// [Live] ("State across a swap"), and reports what changed. Building the
// new limiters and values happens before anything is published: if one
// fails, Swap returns the error and the current set keeps serving,
// unchanged. (A store's Replace failing — memstore's memory budget too
// small for a new table — is reported the same way; the policies replaced
// before it then start afresh on their next request under the old set's
// successor, and the old set keeps deciding on its tables.)
func (l *Live[H]) Swap(set *Set) (Change, error) {
	if set == nil {
		return Change{}, fmt.Errorf("rules: Swap: nil set")
	}
	l.mu.Lock()
	return l.swapLocked(set)
}

// swapLocked is Swap with l.mu held; it unlocks it.
func (l *Live[H]) swapLocked(set *Set) (Change, error) {
	cur := l.cur.Load()
	next, ch, rebuilt, err := l.compile(set, cur)
	if err == nil {
		err = l.replaceTables(cur, rebuilt)
	}
	if err != nil {
		l.mu.Unlock()
		return Change{}, err
	}
	l.gen++
	next.gen = l.gen
	next.refs.Store(1)
	l.old[cur] = true
	l.cur.Store(next)
	if sig := set.sig; sig != nil {
		sig.published()
	}
	l.mu.Unlock()
	cur.Release() // the reference it held as current
	return ch, nil
}

// replaceTables tells a tableStore store about the rebuilt policies,
// listing as in flight the same-named policies of cur and of the
// superseded snapshots still under way. Called with l.mu held.
func (l *Live[H]) replaceTables(cur *Snapshot[H], rebuilt []*core.Policy) error {
	r, ok := tableReplacer(l.store)
	if !ok || len(rebuilt) == 0 {
		return nil
	}
	byName := map[string][]*core.Policy{}
	add := func(s *Snapshot[H]) {
		for _, lim := range s.limiters {
			p := lim.Policy()
			if !slices.Contains(byName[p.Name], p) {
				byName[p.Name] = append(byName[p.Name], p)
			}
		}
	}
	add(cur)
	for s := range l.old {
		add(s)
	}
	for _, p := range rebuilt {
		if _, err := r.Replace(p, byName[p.Name]...); err != nil {
			return fmt.Errorf("rules: policy %q: %w", p.Name, err)
		}
	}
	return nil
}

// drained is called by the last Release of a superseded snapshot: the
// store may drop what only s used.
func (l *Live[H]) drained(s *Snapshot[H]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.old, s)
	l.releaseUnused(s)
	r, ok := tableReplacer(l.store)
	if !ok {
		return
	}
	used := map[*core.Policy]bool{}
	for _, lim := range l.cur.Load().limiters {
		used[lim.Policy()] = true
	}
	for o := range l.old {
		for _, lim := range o.limiters {
			used[lim.Policy()] = true
		}
	}
	var gone []*core.Policy
	for _, lim := range s.limiters {
		if p := lim.Policy(); !used[p] {
			gone = append(gone, p)
		}
	}
	if len(gone) > 0 {
		r.Forget(gone...)
	}
}

// compile builds a snapshot of set, reusing prev's limiters for equal
// policies, and returns the policies it built new Limiters for (a
// tableStore may hold a table of another configuration under any of
// their names: a changed rule's, or a removed rule's added back).
func (l *Live[H]) compile(set *Set, prev *Snapshot[H]) (*Snapshot[H], Change, []*core.Policy, error) {
	s := &Snapshot[H]{set: set, live: l}
	policies := set.Policies()
	prevBy := map[string]*core.Limiter{}
	if prev != nil {
		for _, lim := range prev.limiters {
			prevBy[lim.Policy().Name] = lim
		}
	}
	ch, rebuilt, err := l.compileLimiters(s, policies, prev, prevBy)
	if err != nil {
		return nil, Change{}, nil, err
	}
	if prev != nil {
		s.diffFrom(&ch, policies, prev, prevBy)
	}
	s.handlers = make([]H, len(set.rules))
	s.index()
	if err := l.compileConcurrency(s, prev); err != nil {
		s.releaseNew(prev)
		return nil, Change{}, nil, err
	}
	if l.build != nil {
		for i := range set.rules {
			h, err := l.build(&set.rules[i], s.RuleLimiters(&set.rules[i]))
			if err != nil {
				s.releaseNew(prev)
				return nil, Change{}, nil, fmt.Errorf("rules: rule %q: %w", set.rules[i].Name, err)
			}
			s.handlers[i] = h
		}
	}
	return s, ch, rebuilt, nil
}

// compileLimiters gives s one Limiter per policy: prev's (found in prevBy
// by name) when its policy is equal, else a new one. It returns the
// Change's Added and LimitsChanged and the policies it built Limiters
// for; on an error, s holds no new Limiter.
func (l *Live[H]) compileLimiters(s *Snapshot[H], policies []core.Policy, prev *Snapshot[H], prevBy map[string]*core.Limiter) (Change, []*core.Policy, error) {
	var ch Change
	var rebuilt []*core.Policy
	for i := range policies {
		p := &policies[i]
		old := prevBy[p.Name]
		if old != nil && reflect.DeepEqual(*old.Policy(), *p) {
			s.limiters = append(s.limiters, old)
			continue
		}
		lim, err := core.NewLimiter(l.store, *p, l.limiterOpts(p.Name, prev)...)
		if err != nil {
			s.releaseNew(prev)
			return Change{}, nil, fmt.Errorf("rules: policy %q: %w", p.Name, err)
		}
		s.limiters = append(s.limiters, lim)
		rebuilt = append(rebuilt, lim.Policy())
		switch {
		case old == nil:
			ch.Added = append(ch.Added, p.Name)
		case !sameLimits(old.Policy(), p):
			ch.LimitsChanged = append(ch.LimitsChanged, LimitChange{Name: p.Name, Old: limitsText(old.Policy()), New: limitsText(p)})
		}
	}
	return ch, rebuilt, nil
}

// diffFrom adds to ch what s, compiled from policies, changes from prev
// besides Added and LimitsChanged: the policies Removed, Updated and
// Unchanged.
func (s *Snapshot[H]) diffFrom(ch *Change, policies []core.Policy, prev *Snapshot[H], prevBy map[string]*core.Limiter) {
	set := s.set
	now := map[string]bool{}
	for i := range policies {
		now[policies[i].Name] = true
	}
	for _, lim := range prev.limiters {
		if n := lim.Policy().Name; !now[n] {
			ch.Removed = append(ch.Removed, n)
		}
	}
	// Updated, in file order: a new Limiter on the same limits, or the
	// same Limiter for a rule whose matching changed.
	for i := range policies {
		name := policies[i].Name
		old := prevBy[name]
		switch {
		case old == nil:
		case s.limiters[i] != old:
			if sameLimits(old.Policy(), &policies[i]) {
				ch.Updated = append(ch.Updated, name)
			}
		case i < len(set.rules):
			if o, ok := prev.set.Rule(name); ok && !sameMatch(o, &set.rules[i]) {
				ch.Updated = append(ch.Updated, name)
			} else {
				ch.Unchanged++
			}
		case i < len(set.rules)+len(set.descriptors): // a rule's added policies are counted with it
			ch.Unchanged++
		}
	}
}

// sameLimits reports whether a and b decide alike on one state: what the
// stores key a policy's state by besides its name (core.SameState).
func sameLimits(a, b *core.Policy) bool { return core.SameState(a, b) }

// limitsText describes p's limits for a Change: "gcra 10 per 1m".
func limitsText(p *core.Policy) string { return p.StateString() }

// sameMatch reports whether two rules of one name match and key requests
// alike.
func sameMatch(a, b *Rule) bool {
	return a.Route == b.Route && slices.Equal(a.Methods, b.Methods) && a.id == b.id && a.Key == b.Key &&
		a.policiesMatch() == b.policiesMatch()
}

// Set returns the snapshot's rule set: match a request with its
// [Set.Match], then take the rule's [Snapshot.Limiter] or
// [Snapshot.Handler] from this snapshot.
func (s *Snapshot[H]) Set() *Set { return s.set }

// own reports whether r is one of the snapshot's rules.
func (s *Snapshot[H]) own(r *Rule) bool {
	return r != nil && r.Index >= 0 && r.Index < len(s.set.rules) && &s.set.rules[r.Index] == r
}

// Limiter returns the limiter of r, a rule of this snapshot's set (from
// its Match or Set); nil for a rule of another set, which would mix two
// sets in one request.
func (s *Snapshot[H]) Limiter(r *Rule) *core.Limiter {
	if !s.own(r) {
		return nil
	}
	return s.limiters[r.Index]
}

// Handler returns the value built for r, a rule of this snapshot's set;
// the zero H and false for a rule of another set.
func (s *Snapshot[H]) Handler(r *Rule) (H, bool) {
	if !s.own(r) {
		var zero H
		return zero, false
	}
	return s.handlers[r.Index], true
}

// Descriptor returns the descriptor domain/key of the snapshot's set and
// its limiter, or nil, nil.
func (s *Snapshot[H]) Descriptor(domain, key string) (*Descriptor, *core.Limiter) {
	for i := range s.set.descriptors {
		if d := &s.set.descriptors[i]; d.Domain == domain && d.Key == key {
			return d, s.limiters[len(s.set.rules)+i]
		}
	}
	return nil, nil
}

// Release ends the caller's use of the snapshot; call it exactly once per
// Acquire. The last Release of a superseded snapshot lets a
// tableStore store drop the tables only it used.
func (s *Snapshot[H]) Release() {
	if s.refs.Add(-1) == 0 {
		s.live.drained(s)
	}
}

// Change is what a [Live.Swap] changed, by policy name (a rule's name, a
// descriptor's domain/key), each list in file order.
type Change struct {
	// Added are the policies only the new set has.
	Added []string
	// Removed are the policies only the old set had.
	Removed []string
	// LimitsChanged are the policies whose limits (algorithm, limits,
	// buckets, soft_percent, count_denied or shadow) changed: their state
	// starts as described in [Live].
	LimitsChanged []LimitChange
	// Updated are the rules and descriptors whose limits are unchanged but
	// whose other settings (route, methods, identity, key, fail_mode,
	// mode, sync, fleet_size) changed: their state is kept.
	Updated []string
	// Unchanged counts the rules and descriptors that are identical.
	Unchanged int
}

// LimitChange is one policy whose limits a swap changed.
type LimitChange struct {
	Name string
	// Old and New describe the limits: "gcra 900 per 15m, 200 per 1m".
	Old, New string
}

// String summarizes the change for a log line: "added [a]; removed [b];
// limits changed [c: gcra 10 per 1m -> gcra 20 per 1m]; updated [d]; 3
// unchanged".
func (c Change) String() string {
	var parts []string
	if len(c.Added) > 0 {
		parts = append(parts, fmt.Sprintf("added %v", c.Added))
	}
	if len(c.Removed) > 0 {
		parts = append(parts, fmt.Sprintf("removed %v", c.Removed))
	}
	if len(c.LimitsChanged) > 0 {
		var l []string
		for _, x := range c.LimitsChanged {
			l = append(l, x.Name+": "+x.Old+" -> "+x.New)
		}
		parts = append(parts, "limits changed ["+strings.Join(l, "; ")+"]")
	}
	if len(c.Updated) > 0 {
		parts = append(parts, fmt.Sprintf("updated %v", c.Updated))
	}
	parts = append(parts, fmt.Sprintf("%d unchanged", c.Unchanged))
	return strings.Join(parts, "; ")
}
