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

	"github.com/limitkit/limitkit/core"
)

// Defaults, each overridable by an Option.
const (
	// DefaultMaxKeys caps the keys held per policy whose state is inline
	// (GCRA, token bucket, fixed window: 16–24 bytes a key).
	DefaultMaxKeys = 1 << 22
	// DefaultMaxStateBytes bounds, per policy, the keys held for policies
	// with large state (sliding log, sliding counter): the cap is this many
	// bytes divided by the state size, but never above DefaultMaxKeys.
	DefaultMaxStateBytes = 512 << 20
	// DefaultSweepInterval is how often the background sweeper drops
	// expired keys.
	DefaultSweepInterval = time.Minute
	// inlineWords is the largest state kept inside the hash table itself.
	inlineWords = 4
	shardBits   = 8
	numShards   = 1 << shardBits
	minSlots    = 8
	chunkSize   = 64
	sampleSize  = 8
)

// Store is the embedded, in-process store: a sharded open-addressing hash
// table per policy, holding for every key a seeded 64-bit hash of the key
// (never the key itself) and the algorithm's state words.
//
// Memory: a GCRA or fixed-window key takes a 16-byte slot, a token-bucket
// key 24 bytes; tables stay between 7/16 and 7/8 full. Sliding-log and
// sliding-counter state lives in chunks outside the table.
//
// Bounds: each policy holds at most MaxKeys keys (rounded up to a multiple
// of 256 shards). A new key arriving at a full table evicts, among a few
// candidates near its slot, an expired key if there is one, else the key
// whose state expires soonest; so a request is always tracked, and an
// evicted live key starts afresh (counted in Stats.Evictions). Expired keys
// are dropped by a background sweeper, one shard lock at a time, never on
// the request path.
//
// Two distinct keys whose 64-bit seeded hashes collide share state; the
// seed is random per Store, so an attacker cannot aim for a collision.
//
// Policies are matched by pointer, then by name: Limiters whose policies
// have the same name share state and must agree on the algorithm and limits.
//
// A Store is safe for concurrent use. Close stops the sweeper. The zero
// Store is not usable; call New.
type Store struct {
	seed     maphash.Seed
	tables   atomic.Pointer[map[*core.Policy]*table]
	last     atomic.Pointer[table] // the table last looked up: most stores serve one policy at a time
	mu       sync.Mutex            // serializes table creation
	byName   map[string]*table
	maxKeys  int
	maxBytes int
	clock    core.Clock
	interval time.Duration

	closed    atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	evictions atomic.Uint64
}

var _ core.LocalStore = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithMaxKeys caps the keys held per policy (default DefaultMaxKeys for
// inline state; see DefaultMaxStateBytes for large state). n must be > 0.
func WithMaxKeys(n int) Option { return func(s *Store) { s.maxKeys = n } }

// WithMaxStateBytes sets the memory budget per policy that derives the key
// cap for large-state policies when WithMaxKeys is not given.
func WithMaxStateBytes(n int) Option { return func(s *Store) { s.maxBytes = n } }

// WithClock sets the clock the sweeper uses to decide what has expired
// (default the system clock). Decisions use the time passed to Take.
func WithClock(c core.Clock) Option { return func(s *Store) { s.clock = c } }

// WithSweepInterval sets how often the background sweeper runs (default
// DefaultSweepInterval). d must be > 0.
func WithSweepInterval(d time.Duration) Option { return func(s *Store) { s.interval = d } }

// New returns an empty Store and starts its sweeper.
func New(opts ...Option) (*Store, error) {
	s := &Store{
		seed:     maphash.MakeSeed(),
		byName:   map[string]*table{},
		maxBytes: DefaultMaxStateBytes,
		clock:    core.SystemClock{},
		interval: DefaultSweepInterval,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	switch {
	case s.maxKeys < 0:
		return nil, fmt.Errorf("memstore: WithMaxKeys(%d): the cap must be > 0", s.maxKeys)
	case s.maxBytes <= 0:
		return nil, fmt.Errorf("memstore: WithMaxStateBytes(%d): the budget must be > 0", s.maxBytes)
	case s.clock == nil:
		return nil, errors.New("memstore: WithClock(nil): pass a clock")
	case s.interval <= 0:
		return nil, fmt.Errorf("memstore: WithSweepInterval(%v): the interval must be > 0", s.interval)
	}
	empty := map[*core.Policy]*table{}
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
// It returns core.ErrClosed after Close, and an error for an invalid policy
// or one whose name is already used by a policy with other limits.
func (s *Store) Take(_ context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	t := s.last.Load()
	if t == nil || t.key != p {
		t = (*s.tables.Load())[p]
		if t != nil && t.key == p {
			s.last.Store(t)
		}
	}
	if t == nil {
		var err error
		if t, err = s.register(p); err != nil {
			return core.Decision{Policy: p.Name}, err
		}
	}
	if s.closed.Load() {
		return core.Decision{Policy: p.Name}, core.ErrClosed
	}
	h := maphash.String(s.seed, key) | 1 // 0 marks an empty slot
	sh := &t.shards[h>>(64-shardBits)]
	us := now.UnixMicro()
	sh.mu.Lock()
	d := sh.take(t, h, us, cost)
	sh.mu.Unlock()
	return d, nil
}

// Stats is a snapshot of a Store's size.
type Stats struct {
	// Keys is the number of keys held, over all policies.
	Keys int
	// Evictions counts live keys dropped to make room under the key cap.
	Evictions uint64
}

// Stats returns the current key count and eviction count.
func (s *Store) Stats() Stats {
	st := Stats{Evictions: s.evictions.Load()}
	for _, t := range s.allTables() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			st.Keys += sh.n
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
	for _, t := range s.allTables() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.sweep(t, now)
			sh.mu.Unlock()
		}
	}
}

// allTables lists every table once (several *Policy values with one name
// share a table, so the pointer map holds some tables more than once).
func (s *Store) allTables() []*table {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := make([]*table, 0, len(s.byName))
	for _, t := range s.byName {
		ts = append(ts, t)
	}
	return ts
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

// register finds or creates the table of p.
func (s *Store) register(p *core.Policy) (*table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := (*s.tables.Load())[p]; t != nil {
		return t, nil
	}
	c, err := p.Compile()
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	t := s.byName[p.Name]
	if t != nil {
		q := t.policy.Policy()
		if q.Algorithm != p.Algorithm || !slices.Equal(q.Limits, p.Limits) || q.Buckets != p.Buckets || q.SoftPercent != p.SoftPercent {
			return nil, fmt.Errorf("memstore: policy name %q is used by two policies with different limits; give each its own name", p.Name)
		}
	} else {
		t = s.newTable(c)
		t.key = p
		s.byName[p.Name] = t
	}
	old := *s.tables.Load()
	m := make(map[*core.Policy]*table, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[p] = t
	s.tables.Store(&m)
	return t, nil
}

// table holds one policy's keys.
type table struct {
	key      *core.Policy // the first *Policy registered for this table
	policy   *core.Compiled
	words    int  // state words per key
	inline   bool // state stored in the slot
	shardCap int  // keys per shard
	maxSlots int  // slots per shard at most (power of two)
	store    *Store
	shards   [numShards]shard
}

func (s *Store) newTable(c *core.Compiled) *table {
	t := &table{policy: c, words: c.StateWords(), store: s}
	t.inline = t.words <= inlineWords
	maxKeys := s.maxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
		if !t.inline {
			maxKeys = min(maxKeys, max(numShards, s.maxBytes/(8*t.words)))
		}
	}
	t.shardCap = (maxKeys + numShards - 1) / numShards
	// the table may be 7/8 full before it grows
	t.maxSlots = max(minSlots, 1<<bits.Len(uint(t.shardCap*8/7)))
	return t
}

// shard is one lock's worth of a table: linear probing over keys, with the
// state of slot i in vals[i*w:(i+1)*w] (inline) or in chunk vals[i].
type shard struct {
	mu      sync.Mutex
	n       int
	keys    []uint64
	vals    []int64
	chunks  [][]int64
	free    []int64
	scratch []int64
	_       [40]byte // keep neighbouring shards' locks off one cache line
}

func (sh *shard) state(t *table, slot int) []int64 {
	if t.inline {
		return sh.vals[slot*t.words : (slot+1)*t.words : (slot+1)*t.words]
	}
	ref := sh.vals[slot]
	c := sh.chunks[ref/chunkSize]
	off := int(ref%chunkSize) * t.words
	return c[off : off+t.words : off+t.words]
}

// take decides for hash h, inserting the key when the decision changes a
// fresh state (a peek or a denial of a new key stores nothing).
func (sh *shard) take(t *table, h uint64, now, cost int64) core.Decision {
	if sh.keys != nil {
		mask := len(sh.keys) - 1
		for i := int(h) & mask; ; i = (i + 1) & mask {
			k := sh.keys[i]
			if k == h {
				return t.policy.Decide(sh.state(t, i), now, cost)
			}
			if k == 0 {
				break
			}
		}
	}
	if len(sh.scratch) != t.words {
		sh.scratch = make([]int64, t.words)
	} else {
		clear(sh.scratch)
	}
	d := t.policy.Decide(sh.scratch, now, cost)
	for _, v := range sh.scratch {
		if v != 0 {
			copy(sh.insert(t, h, now), sh.scratch)
			break
		}
	}
	return d
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
	if !t.inline {
		sh.vals[i] = sh.alloc(t)
	}
	st := sh.state(t, i)
	clear(st)
	return st
}

func (sh *shard) alloc(t *table) int64 {
	if n := len(sh.free); n > 0 {
		ref := sh.free[n-1]
		sh.free = sh.free[:n-1]
		return ref
	}
	// every chunk before the last is full; the last has len(chunks)*chunkSize - used free entries
	used := int64(sh.n-1) + int64(len(sh.free)) // slots in use before this one
	if used >= int64(len(sh.chunks))*chunkSize {
		sh.chunks = append(sh.chunks, make([]int64, chunkSize*t.words))
	}
	return used
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

// evict drops one key to make room for h: among the probe run of h and a
// sample of slots, an expired key if any, else the soonest to expire.
func (sh *shard) evict(t *table, h uint64, now int64) {
	mask := len(sh.keys) - 1
	victim, best := -1, int64(0)
	consider := func(i int) bool {
		e := t.policy.ExpiresAt(sh.state(t, i), now)
		if victim < 0 || e < best {
			victim, best = i, e
		}
		return e <= now
	}
	i := int(h) & mask
	for seen := 0; sh.keys[i] != 0 && seen < 4*sampleSize; seen++ {
		if consider(i) {
			break
		}
		i = (i + 1) & mask
	}
	if victim < 0 || best > now {
		j := int(bits.RotateLeft64(h, 29)) & mask
		for found := 0; found < sampleSize; j = (j + 1) & mask {
			if sh.keys[j] != 0 {
				found++
				if consider(j) {
					break
				}
			}
		}
	}
	if best > now {
		t.store.evictions.Add(1)
	}
	sh.delete(t, victim)
}

// delete removes slot i, shifting later members of its probe run back so
// lookups never need tombstones.
func (sh *shard) delete(t *table, i int) {
	if !t.inline {
		sh.free = append(sh.free, sh.vals[i])
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
