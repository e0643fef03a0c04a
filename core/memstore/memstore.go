package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/limitkit/limitkit/core"
)

// Defaults, each overridable by an Option.
const (
	// DefaultMaxKeys caps the keys held per policy (for large-state
	// policies the memory budget usually caps them lower; see
	// DefaultMaxStateBytes).
	DefaultMaxKeys = 1 << 22
	// DefaultMaxStateBytes is the memory budget of one policy's table:
	// slots, state and per-shard buffers. The key cap is derived from it
	// (never above DefaultMaxKeys) unless WithMaxKeys alone is given.
	DefaultMaxStateBytes = 512 << 20
	// DefaultMaxPolicies caps the distinct policy names a Store holds
	// tables for.
	DefaultMaxPolicies = 1024
	// maxKeysLimit bounds WithMaxKeys (far above any memory).
	maxKeysLimit int64 = 1 << 32
	// DefaultSweepInterval is how often the background sweeper drops
	// expired keys.
	DefaultSweepInterval = time.Minute
	// inlineWords is the largest state kept inside the hash table itself.
	inlineWords = 4
	shardBits   = 8
	numShards   = 1 << shardBits
	// minShardKeys is the fewest keys a shard holds when the cap allows:
	// small caps use fewer shards, so that eviction always has a choice.
	minShardKeys = 64
	minSlots     = 8
	chunkSize    = 64
	// eviction candidates: the newest keys, the new key's probe run, a
	// pseudo-random sample, and, when all of those are limited, a window
	// of a scan that resumes where the previous one stopped.
	recentSize = 8
	probeSize  = 8
	sampleSize = 8
	scanSize   = minShardKeys // a whole shard of the smallest size
)

// Store is the embedded, in-process store: a sharded open-addressing hash
// table per policy, holding for every key a seeded 64-bit hash of the key
// (never the key itself) and the algorithm's state words.
//
// Memory: a GCRA or fixed-window key takes a 16-byte slot, a token-bucket
// key 24 bytes; tables stay between 7/16 and 7/8 full. Sliding-log and
// sliding-counter state lives in chunks outside the table. Each policy's
// table holds at most its key cap, and what it holds (slots, state,
// buffers, counted as the Go allocator takes them and reported by
// Stats.Bytes) stays within the memory budget (WithMaxStateBytes, unless
// WithMaxKeys alone replaced it); growing a shard briefly also holds its
// previous slot arrays until the garbage collector frees them.
//
// Key cap: WithMaxKeys, or the keys that fit the budget (at most
// DefaultMaxKeys), or the smaller of the two when both options are given;
// rounded to whole shards. Small caps use fewer shards (a shard holds at
// least 64 keys when the cap allows) so that eviction picks among many.
//
// Eviction: a new key arriving at a full shard replaces one key, chosen to
// lose the least information. The candidates are the shard's 8 newest
// keys, 8 keys of the new key's probe run, 8 pseudo-random keys and, when
// none of those has quota left, the next 64 keys of a scan that resumes
// where the last one stopped, considered in that order:
//
//  1. the first candidate whose state has expired (it equals a fresh
//     key's: nothing is lost, and no eviction is counted) or that has
//     spent at most one unit of its quota (it loses at most that unit;
//     counted) is taken at once, so an expired key later in the order is
//     not preferred to a nearly full one found first;
//  2. else the candidate with the most quota left relative to its limit
//     (ties: the one expiring soonest), counted in Stats.Evictions;
//  3. only when no candidate has any quota left, the newest candidate (the
//     most recently inserted key), also counted in Stats.LimitedEvictions.
//
// The guarantee: a key that is limited (no quota left) is never evicted
// while a candidate has quota left, so a flood of new keys, which have
// quota left after their requests, never gives a limited key a fresh
// quota: each flood key is the better victim, and the flood evicts its own
// keys. When every candidate is limited (a limit of one request, or an
// attacker spending a key's whole quota on each of a shard's worth of
// keys), the newest goes first, so again a flood evicts its own keys
// before the keys limited before it. An evicted key that had quota left
// starts afresh: it may get up to the quota it had spent again.
// Eviction considers at most 88 keys under the shard lock (every key of a
// shard of 64). Expired keys are dropped by a background sweeper, one
// shard lock at a time, never on the request path.
//
// Two distinct keys whose 64-bit seeded hashes collide share state; the
// seed is random per Store, so an attacker cannot aim for a collision.
//
// Policies are matched by name: every *core.Policy with a given name
// shares one table, so Limiters built per request from the same policy
// share one quota per key (lookup by name costs a map read and a field
// comparison; reusing one Limiter is cheaper). Policies with the same name
// must agree on the algorithm, limits, buckets, soft percentage,
// CountDenied, Shadow and elastic ceiling: core.NewLimiter refuses one
// that does not while a Limiter of the other is live (the Store is a
// core.PolicyRegistrar, see [Store.RegisterPolicy]), and Take returns an
// error for one used without a Limiter. A Store holds at most
// DefaultMaxPolicies names (WithMaxPolicies); a new name beyond that is an
// error of NewLimiter: put per-client variation in the key, not in the
// policy name. Releasing a name's last Limiter (core.Limiter.Release)
// drops its table.
//
// A Store is safe for concurrent use. Close stops the sweeper. The zero
// Store is not usable; call New.
type Store struct {
	seed        maphash.Seed
	tables      atomic.Pointer[map[string]*table] // copy on write, under mu
	last        atomic.Pointer[table]             // the table last looked up: most stores serve one policy at a time
	mu          sync.Mutex                        // serializes table creation
	maxKeys     int
	maxBytes    int
	bytesSet    bool
	maxPolicies int
	clock       core.Clock
	interval    time.Duration

	closed           atomic.Bool
	stop             chan struct{}
	done             chan struct{}
	closeOnce        sync.Once
	evictions        atomic.Uint64
	limitedEvictions atomic.Uint64

	replaced // tables Replace set aside (replace.go)
	registry // policy registrations (registrar.go)
}

var _ core.LocalStore = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithMaxKeys caps the keys held per policy (default: what fits the memory
// budget, at most DefaultMaxKeys). n must be in (0, 2^32]. Given alone, it
// replaces the default budget; with WithMaxStateBytes, the smaller cap
// applies.
func WithMaxKeys(n int) Option { return func(s *Store) { s.maxKeys = n } }

// WithMaxStateBytes sets the memory budget of each policy's table
// (default DefaultMaxStateBytes): the slots, the state and the per-shard
// buffers stay within n bytes. n must be > 0, and large enough for one key
// of each policy (Take returns an error naming the policy otherwise).
func WithMaxStateBytes(n int) Option {
	return func(s *Store) { s.maxBytes, s.bytesSet = n, true }
}

// WithMaxPolicies caps the distinct policy names the Store holds tables
// for (default DefaultMaxPolicies). n must be > 0.
func WithMaxPolicies(n int) Option { return func(s *Store) { s.maxPolicies = n } }

// WithClock sets the clock the sweeper uses to decide what has expired
// (default the system clock). Decisions use the time passed to Take.
func WithClock(c core.Clock) Option { return func(s *Store) { s.clock = c } }

// WithSweepInterval sets how often the background sweeper runs (default
// DefaultSweepInterval). d must be > 0.
func WithSweepInterval(d time.Duration) Option { return func(s *Store) { s.interval = d } }

// New returns an empty Store and starts its sweeper.
func New(opts ...Option) (*Store, error) {
	s := &Store{
		seed:        maphash.MakeSeed(),
		maxBytes:    DefaultMaxStateBytes,
		maxPolicies: DefaultMaxPolicies,
		clock:       core.SystemClock{},
		interval:    DefaultSweepInterval,
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	switch {
	case s.maxKeys < 0 || int64(s.maxKeys) > maxKeysLimit:
		return nil, fmt.Errorf("memstore: WithMaxKeys(%d): the cap must be in (0, 2^32]", s.maxKeys)
	case s.maxBytes <= 0:
		return nil, fmt.Errorf("memstore: WithMaxStateBytes(%d): the budget must be > 0", s.maxBytes)
	case s.maxPolicies <= 0:
		return nil, fmt.Errorf("memstore: WithMaxPolicies(%d): the cap must be > 0", s.maxPolicies)
	case s.clock == nil:
		return nil, errors.New("memstore: WithClock(nil): pass a clock")
	case s.interval <= 0:
		return nil, fmt.Errorf("memstore: WithSweepInterval(%v): the interval must be > 0", s.interval)
	}
	empty := map[string]*table{}
	s.tables.Store(&empty)
	go s.sweeper()
	return s, nil
}

// MustNew is New that panics on a configuration error.
func MustNew(opts ...Option) *Store {
	s, err := New(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Local reports true: Take never blocks on I/O.
func (s *Store) Local() bool { return true }

// Take applies cost to key under p at now, atomically (see core.Store).
// It returns core.ErrClosed after Close, and an error for an invalid
// policy, one whose name is already used by a policy with other limits,
// or a new name beyond the Store's policy cap.
func (s *Store) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (d core.Decision, err error) {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		err = s.takeSlow(&d, key, p, now, cost)
		return d, err
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(&d, t, h, us, cost, false)
	sh.mu.Unlock()
	return d, nil
}

// TakeTo is Take writing the decision into *d, which it overwrites
// whole, and returning only the error: for a caller that keeps the
// decision in a larger result and calls the Store directly (the
// middleware adapters, when [core.Limiter.DirectStore] is this Store),
// so that no Decision is copied on the way. d must not be nil; TakeTo
// does not keep it. A call that returns an error consumes no quota.
func (s *Store) TakeTo(_ context.Context, key string, p *core.Policy, now time.Time, cost int64, d *core.Decision) error {
	t := s.last.Load()
	if t == nil || t.key != p || s.closed.Load() {
		return s.takeSlow(d, key, p, now, cost)
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, false)
	sh.mu.Unlock()
	return nil
}

// takeSlow is TakeTo for a policy other than the last one used, or after
// Close. (Take and TakeTo each write out their common case: a shared
// function costs a hot-key decision 5 of its 40 ns.)
func (s *Store) takeSlow(d *core.Decision, key string, p *core.Policy, now time.Time, cost int64) error {
	t, err := s.lookup(p)
	if err != nil {
		*d = core.Decision{}
		if p != nil {
			d.Policy = p.Name
		}
		return err
	}
	if s.closed.Load() {
		*d = core.Decision{Policy: p.Name}
		return core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	us := now.UnixMicro()
	sh.mu.Lock()
	sh.take(d, t, h, us, cost, false)
	sh.mu.Unlock()
	return nil
}

// shardOf is key's hash (never 0: 0 marks an empty slot) and shard.
func (t *table) shardOf(seed maphash.Seed, key string) (uint64, *shard) {
	h := maphash.String(seed, key) | 1
	return h, &t.shards[(h>>t.shift)&(numShards-1)]
}

var _ core.ElasticStore = (*Store)(nil)

// TakeElastic applies cost to key under the elastic policy p at now
// against its limits raised to the elastic ceiling, atomically under the
// key's lock (see core.ElasticStore and core.Compiled.DecideElasticTo).
// For a policy without Elastic it is Take. Errors as Take.
func (s *Store) TakeElastic(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	t, err := s.lookup(p)
	if err != nil {
		var d core.Decision
		if p != nil {
			d.Policy = p.Name
		}
		return d, err
	}
	if s.closed.Load() {
		return core.Decision{Policy: p.Name}, core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	var d core.Decision
	sh.mu.Lock()
	sh.take(&d, t, h, now.UnixMicro(), cost, true)
	sh.mu.Unlock()
	return d, nil
}

var _ core.Refunder = (*Store)(nil)

// Refund gives cost back to key under p at now, under the key's lock (see
// core.Refunder): what a CapacityLimit releases. It returns an error for
// a policy that is not Refundable, and core.ErrClosed after Close.
func (s *Store) Refund(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) error {
	t, err := s.lookup(p)
	if err != nil {
		return err
	}
	if !p.Refundable() {
		return fmt.Errorf("memstore: policy %q cannot be refunded (only a hard GCRA or fixed-window policy can)", p.Name)
	}
	if s.closed.Load() {
		return core.ErrClosed
	}
	h, sh := t.shardOf(s.seed, key)
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		t.policy.Refund(sh.state(t, i), now.UnixMicro(), cost)
	}
	sh.mu.Unlock()
	return nil
}

// lookup finds the table of p by name, creating it on first use.
func (s *Store) lookup(p *core.Policy) (*table, error) {
	if p == nil {
		return nil, errors.New("memstore: nil policy")
	}
	t := (*s.tables.Load())[p.Name]
	if t == nil {
		return s.register(p)
	}
	if t.key == p {
		s.last.Store(t)
		return t, nil
	}
	if a := s.asideTable(p); a != nil {
		return a, nil // a request under way across a Replace (replace.go)
	}
	if !sameConfig(t.policy.Policy(), p) {
		return nil, conflict(p.Name)
	}
	return t, nil
}

// sameConfig reports whether a and b decide alike on one state (FailMode
// is the Limiter's business, not the store's): core.SameState.
func sameConfig(a, b *core.Policy) bool { return core.SameState(a, b) }

func conflict(name string) error {
	return fmt.Errorf("memstore: policy name %q is used by two policies with different limits or switches "+
		"(algorithm, limits, buckets, soft_percent, count_denied, shadow, elastic ceiling); give each its own name", name)
}

// Stats is a snapshot of a Store's size.
type Stats struct {
	// Keys is the number of keys held, over all policies.
	Keys int
	// Policies is the number of policy tables (distinct policy names,
	// plus the tables Replace set aside for requests in flight).
	Policies int
	// Bytes is the memory the tables hold (slots, state, buffers, as
	// allocated), over all policies; each table's share stays within its
	// memory budget.
	Bytes int64
	// Evictions counts live keys dropped to make room under the key cap.
	Evictions uint64
	// LimitedEvictions counts the evictions (included in Evictions) of
	// keys that had no quota left: they happen only when every candidate
	// of a shard is limited, and give the evicted key a fresh quota. A
	// growing count means the cap is too small for the traffic.
	LimitedEvictions uint64
}

// Stats returns the current sizes and eviction counts.
func (s *Store) Stats() Stats {
	st := Stats{Evictions: s.evictions.Load(), LimitedEvictions: s.limitedEvictions.Load()}
	for _, t := range *s.tables.Load() {
		st.Policies++
		st.Bytes += int64(allocBytes(int(unsafe.Sizeof(*t))))
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			st.Keys += sh.n
			st.Bytes += sh.bytes()
			sh.mu.Unlock()
		}
	}
	return st
}

// Close stops the sweeper and makes later Takes return core.ErrClosed. It
// is idempotent and always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
	})
	return nil
}

// Sweep drops every key whose state has expired at the clock's now. The
// sweeper calls it; tests with a manual clock may call it directly.
func (s *Store) Sweep() {
	now := s.clock.Now().UnixMicro()
	for _, t := range *s.tables.Load() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.sweep(t, now)
			sh.mu.Unlock()
		}
	}
}

func (s *Store) sweeper() {
	defer close(s.done)
	tk := time.NewTicker(s.interval)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			s.Sweep()
		}
	}
}

// register finds or creates the table of p's name.
func (s *Store) register(p *core.Policy) (*table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.tables.Load()
	if t := old[p.Name]; t != nil {
		if t.key != p && !sameConfig(t.policy.Policy(), p) {
			return nil, conflict(p.Name)
		}
		return t, nil
	}
	c, err := p.Compile()
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	if len(old) >= s.maxPolicies {
		return nil, fmt.Errorf("memstore: policy %q would be the store's %d-th policy name, above its cap of %d (WithMaxPolicies): "+
			"a policy is configuration, built once; put per-client variation in the key, not in the policy name", p.Name, len(old)+1, s.maxPolicies)
	}
	t, err := s.newTable(c)
	if err != nil {
		return nil, err
	}
	t.key = p
	m := make(map[string]*table, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[p.Name] = t
	s.tables.Store(&m)
	return t, nil
}

// table holds one policy's keys.
type table struct {
	key       *core.Policy // the first *Policy registered for this table
	policy    *core.Compiled
	words     int  // state words per key
	inline    bool // state stored in the slot
	shift     uint // a key's shard is its hash's top 64−shift bits
	shardCap  int  // keys per shard
	maxSlots  int  // slots per shard at most (power of two)
	maxChunks int  // state chunks per shard at most (large state)
	store     *Store
	shards    [numShards]shard
}

// newTable sizes c's table: the key cap from the options, the shard count
// so that a shard holds at least minShardKeys keys when the cap allows,
// and the keys per shard within the memory budget.
func (s *Store) newTable(c *core.Compiled) (*table, error) {
	t := &table{policy: c, words: c.StateWords(), store: s}
	t.inline = t.words <= inlineWords
	keyCap, budget := s.maxKeys, -1
	if keyCap == 0 {
		keyCap, budget = DefaultMaxKeys, s.maxBytes
	} else if s.bytesSet {
		budget = s.maxBytes
	}
	b, per := shardBits, 0
	for ; b >= 0; b-- {
		n := 1 << b
		per = (keyCap + n - 1) / n
		if budget >= 0 {
			per = min(per, t.fit(n, budget))
		}
		if per >= minShardKeys {
			break
		}
	}
	if b < 0 {
		b = 0
		per = keyCap
		if budget >= 0 {
			per = min(per, t.fit(1, budget))
		}
	}
	if per < 1 {
		return nil, fmt.Errorf("memstore: policy %q keeps %d bytes of state per key, and the memory budget WithMaxStateBytes(%d) does not hold one key; raise the budget",
			c.Policy().Name, 8*t.words, budget)
	}
	t.shift = uint(64 - b)
	t.shardCap = per
	t.maxSlots = slotsFor(per)
	t.maxChunks = (per + chunkSize - 1) / chunkSize
	return t, nil
}

// slotsFor is the slot count of a shard holding per keys at most 7/8 full.
func slotsFor(per int) int { return max(minSlots, 1<<bits.Len(uint(per*8/7))) }

// shardBytes is the most a shard of per keys holds: slots, state chunks
// and their index, and the scratch state, as allocated.
func (t *table) shardBytes(per int) int {
	if per == 0 {
		return 0
	}
	w := 1
	if t.inline {
		w = t.words
	}
	slots := slotsFor(per)
	b := allocBytes(8*slots) + allocBytes(8*slots*w) + allocBytes(8*t.words)
	if !t.inline {
		b += per/chunkSize*allocBytes(8*chunkSize*t.words) + allocBytes(8*(per%chunkSize)*t.words) +
			indexBytes((per+chunkSize-1)/chunkSize)
	}
	return b
}

// fit is the most keys per shard whose n shards fit budget bytes.
func (t *table) fit(n, budget int) int {
	avail := budget - allocBytes(int(unsafe.Sizeof(table{})))
	lo, hi := 0, DefaultMaxKeys // invariant: lo fits
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if n*t.shardBytes(m) <= avail {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// shard is one lock's worth of a table: linear probing over keys, with the
// state of slot i in vals[i*w:(i+1)*w] (inline) or in the chunk entry
// vals[i].
type shard struct {
	mu      sync.Mutex
	n       int
	keys    []uint64
	vals    []int64
	chunks  [][]int64
	next    int64 // chunk entries handed out so far
	free    int64 // 1 + the first free chunk entry, 0 for none; each free entry's first word links the next
	scratch []int64
	recent  [recentSize]uint64 // hashes of the newest keys, a ring
	rpos    uint32             // next ring position
	hand    uint32             // where the eviction scan resumes
	_       [56]byte           // keep neighbouring shards' locks off one cache line
}

func (sh *shard) state(t *table, slot int) []int64 {
	if t.inline {
		return sh.vals[slot*t.words : (slot+1)*t.words : (slot+1)*t.words]
	}
	return sh.entry(t, sh.vals[slot])
}

func (sh *shard) entry(t *table, ref int64) []int64 {
	c := sh.chunks[ref/chunkSize]
	off := int(ref%chunkSize) * t.words
	return c[off : off+t.words : off+t.words]
}

// bytes is the memory the shard holds, as allocated.
func (sh *shard) bytes() int64 {
	b := allocBytes(8*cap(sh.keys)) + allocBytes(8*cap(sh.vals)) + allocBytes(8*cap(sh.scratch))
	if sh.chunks != nil {
		b += indexBytes(cap(sh.chunks))
	}
	for _, c := range sh.chunks {
		b += allocBytes(8 * cap(c))
	}
	return int64(b)
}

// sizeClasses are the Go allocator's size classes for small objects
// (internal/runtime/gc); TestAllocBytes checks them against the runtime.
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocBytes is what the Go allocator takes for an n-byte object without
// pointers: its size class up to 32 KiB, whole 8 KiB pages above.
func allocBytes(n int) int {
	if n <= 0 {
		return 0
	}
	if n > 32<<10 {
		return (n + 8<<10 - 1) &^ (8<<10 - 1)
	}
	i, _ := slices.BinarySearch(sizeClasses[:], uint16(n))
	return int(sizeClasses[i])
}

// indexBytes is what an index of n chunks takes (slice headers, with the
// allocator's 8-byte header for objects with pointers).
func indexBytes(n int) int { return allocBytes(24*n + 8) }

// take decides for hash h into *d, inserting the key when the decision changes a
// fresh state (a peek or a denial of a new key stores nothing).
func (sh *shard) take(d *core.Decision, t *table, h uint64, now, cost int64, elastic bool) {
	if i := sh.find(h); i >= 0 {
		if elastic {
			t.policy.DecideElasticTo(d, sh.state(t, i), now, cost)
		} else {
			t.policy.DecideTo(d, sh.state(t, i), now, cost)
		}
		return
	}
	if len(sh.scratch) != t.words {
		sh.scratch = make([]int64, t.words)
	} else {
		clear(sh.scratch)
	}
	if elastic {
		t.policy.DecideElasticTo(d, sh.scratch, now, cost)
	} else {
		t.policy.DecideTo(d, sh.scratch, now, cost)
	}
	for _, v := range sh.scratch {
		if v != 0 {
			copy(sh.insert(t, h, now), sh.scratch)
			break
		}
	}
}

// find returns the slot of hash h, or -1.
func (sh *shard) find(h uint64) int {
	if sh.keys == nil {
		return -1
	}
	mask := len(sh.keys) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sh.keys[i] {
		case h:
			return i
		case 0:
			return -1
		}
	}
}

// insert adds hash h (known absent) and returns its zeroed state.
func (sh *shard) insert(t *table, h uint64, now int64) []int64 {
	if sh.n >= t.shardCap {
		sh.evict(t, h, now)
	}
	if sh.keys == nil || (sh.n+1)*8 > len(sh.keys)*7 {
		sh.grow(t)
	}
	mask := len(sh.keys) - 1
	i := int(h) & mask
	for sh.keys[i] != 0 {
		i = (i + 1) & mask
	}
	sh.keys[i] = h
	sh.n++
	sh.recent[sh.rpos%recentSize] = h
	sh.rpos++
	if !t.inline {
		sh.vals[i] = sh.alloc(t)
	}
	st := sh.state(t, i)
	clear(st)
	return st
}

// alloc returns a free chunk entry; a shard never holds more entries than
// its key cap (the last chunk is cut to fit).
func (sh *shard) alloc(t *table) int64 {
	if sh.free != 0 {
		ref := sh.free - 1
		sh.free = sh.entry(t, ref)[0]
		return ref
	}
	ref := sh.next
	if ref%chunkSize == 0 {
		if sh.chunks == nil {
			sh.chunks = make([][]int64, 0, t.maxChunks)
		}
		sh.chunks = append(sh.chunks, make([]int64, min(chunkSize, int64(t.shardCap)-ref)*int64(t.words)))
	}
	sh.next++
	return ref
}

func (sh *shard) grow(t *table) {
	n := minSlots
	if sh.keys != nil {
		n = 2 * len(sh.keys)
	}
	if n > t.maxSlots {
		if sh.keys != nil {
			return // at the cap: evict keeps n below shardCap
		}
		n = t.maxSlots
	}
	oldKeys, oldVals := sh.keys, sh.vals
	w := 1
	if t.inline {
		w = t.words
	}
	sh.keys = make([]uint64, n)
	sh.vals = make([]int64, n*w)
	mask := n - 1
	for j, k := range oldKeys {
		if k == 0 {
			continue
		}
		i := int(k) & mask
		for sh.keys[i] != 0 {
			i = (i + 1) & mask
		}
		sh.keys[i] = k
		copy(sh.vals[i*w:(i+1)*w], oldVals[j*w:(j+1)*w])
	}
}

// evictor chooses the key a new key replaces at a full shard (see Store).
type evictor struct {
	t      *table
	sh     *shard
	now    int64
	slot   int   // best candidate so far, -1 for none
	rem    int64 // its quota left (nominal)
	capa   int64 // its binding limit's capacity
	exp    int64 // its expiry
	live   bool  // false when slot has expired
	newest int   // slot of the newest key among the candidates, -1 for none
}

// consider scores slot i and reports whether to stop looking: i has
// expired, or has spent at most one unit of its quota, so evicting it
// loses (almost) nothing.
func (e *evictor) consider(i int) bool {
	st := e.sh.state(e.t, i)
	exp := e.t.policy.ExpiresAt(st, e.now)
	if exp <= e.now {
		e.slot, e.live = i, false
		return true
	}
	d := e.t.policy.Decide(st, e.now, 0) // a peek: changes nothing
	capa := d.Limit.Burst
	if capa <= 0 {
		capa = d.Limit.Requests
	}
	rem := max(0, d.Remaining)
	// more quota left relative to capacity, then sooner expiry
	if e.slot < 0 || rem*e.capa > e.rem*capa || rem*e.capa == e.rem*capa && exp < e.exp {
		e.slot, e.rem, e.capa, e.exp, e.live = i, rem, capa, exp, true
	}
	return rem > 0 && rem >= capa-1
}

// evict drops one key to make room for h.
func (sh *shard) evict(t *table, h uint64, now int64) {
	e := evictor{t: t, sh: sh, now: now, slot: -1, newest: -1}
	if !e.recent() && !e.around(h) && e.rem == 0 {
		e.scan()
	}
	victim := e.slot
	if e.live {
		if e.rem == 0 {
			// every candidate is limited: the newest goes, so that a
			// flood of new keys evicts its own
			if e.newest >= 0 {
				victim = e.newest
			}
			t.store.limitedEvictions.Add(1)
		}
		t.store.evictions.Add(1)
	}
	sh.delete(t, victim)
}

// recent considers the shard's newest keys, newest first.
func (e *evictor) recent() bool {
	sh := e.sh
	for k := uint32(1); k <= recentSize; k++ {
		h := sh.recent[(sh.rpos-k)%recentSize]
		if h == 0 {
			continue
		}
		i := sh.find(h)
		if i < 0 {
			continue
		}
		if e.newest < 0 {
			e.newest = i
		}
		if e.consider(i) {
			return true
		}
	}
	return false
}

// around considers the probe run of h and a pseudo-random sample.
func (e *evictor) around(h uint64) bool {
	keys := e.sh.keys
	mask := len(keys) - 1
	i := int(h) & mask
	for seen := 0; keys[i] != 0 && seen < probeSize; seen++ {
		if e.consider(i) {
			return true
		}
		i = (i + 1) & mask
	}
	i = int(bits.RotateLeft64(h, 29)) & mask
	for found, visited := 0, 0; found < sampleSize && visited < len(keys); i, visited = (i+1)&mask, visited+1 {
		if keys[i] != 0 {
			found++
			if e.consider(i) {
				return true
			}
		}
	}
	return false
}

// scan considers up to scanSize more keys from where the last scan
// stopped, until one has quota left.
func (e *evictor) scan() {
	sh := e.sh
	mask := len(sh.keys) - 1
	i := int(sh.hand) & mask
	for found, visited := 0, 0; found < scanSize && visited < len(sh.keys); i, visited = (i+1)&mask, visited+1 {
		if sh.keys[i] != 0 {
			found++
			if e.consider(i) || e.rem > 0 {
				i = (i + 1) & mask
				break
			}
		}
	}
	sh.hand = uint32(i)
}

// delete removes slot i, shifting later members of its probe run back so
// lookups never need tombstones.
func (sh *shard) delete(t *table, i int) {
	if !t.inline {
		ref := sh.vals[i]
		sh.entry(t, ref)[0] = sh.free
		sh.free = ref + 1
	}
	w := 1
	if t.inline {
		w = t.words
	}
	mask := len(sh.keys) - 1
	j := i
	for {
		j = (j + 1) & mask
		k := sh.keys[j]
		if k == 0 {
			break
		}
		home := int(k) & mask
		// k stays when its home is cyclically in (i, j]
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		sh.keys[i] = k
		copy(sh.vals[i*w:(i+1)*w], sh.vals[j*w:(j+1)*w])
		i = j
	}
	sh.keys[i] = 0
	clear(sh.vals[i*w : (i+1)*w])
	sh.n--
}

// sweep drops every key whose state has expired at now.
func (sh *shard) sweep(t *table, now int64) {
	for i := 0; i < len(sh.keys); {
		if sh.keys[i] != 0 && t.policy.ExpiresAt(sh.state(t, i), now) <= now {
			sh.delete(t, i) // a later key may have shifted into i: look again
			continue
		}
		i++
	}
}
