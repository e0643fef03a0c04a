package memstore

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// Defaults, each overridable by an Option.
const (
	// defaultMaxKeys caps the keys held per policy (for large-state
	// policies the memory budget usually caps them lower; see
	// defaultMaxStateBytes).
	defaultMaxKeys = 1 << 22
	// defaultMaxStateBytes is the memory budget of one policy's table:
	// slots, state and per-shard buffers. The key cap is derived from it
	// (never above 4,194,304 (2^22)) unless WithMaxKeys alone is given.
	defaultMaxStateBytes = 512 << 20
	// defaultMaxPolicies caps the distinct policy names a Store holds
	// tables for.
	defaultMaxPolicies = 1024
	// maxKeysLimit bounds WithMaxKeys (far above any memory).
	maxKeysLimit int64 = 1 << 32
	// defaultSweepInterval is how often the background sweeper drops
	// expired keys.
	defaultSweepInterval = time.Minute
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
// 4,194,304 (2^22)), or the smaller of the two when both options are given;
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
// storekit.PolicyRegistrar, see RegisterPolicy), and Take returns an
// error for one used without a Limiter. A Store holds at most
// defaultMaxPolicies names (WithMaxPolicies); a new name beyond that is an
// error of NewLimiter: put per-client variation in the key, not in the
// policy name. Releasing a name's last Limiter (core.Limiter.Release)
// drops its table.
//
// Besides the methods below, the value New returns implements the optional
// store interfaces of package core that a [core.Limiter] finds by type
// assertion (storekit.LocalStore, storekit.VerbStore, storekit.ReserveStore,
// storekit.ElasticStore, storekit.Refunder, storekit.SlotStore, storekit.PolicyRegistrar):
// they are core's business, reached through a Limiter, and are not part of
// this package's API.
//
// A Store is safe for concurrent use. Close stops the sweeper. Build one
// with New (or MustNew); a nil Store is not usable.
type Store interface {
	core.Store
	// Stats returns the current sizes and eviction counts.
	Stats() Stats
	// Replace gives p's name a new, empty table when the name's table holds
	// another configuration (algorithm, limits, buckets, soft percentage,
	// CountDenied or Shadow; see [Store]): from then on p, and any policy of
	// p's configuration, decides on the new table, so every key starts with
	// its full quota. It reports whether it replaced a table. When the name
	// has a table of p's configuration (its state is then kept), Replace does
	// nothing and returns false; when it has none yet, Replace creates p's, as
	// p's first Take would, and returns false (a policy of another
	// configuration then cannot take the name first).
	//
	// The replaced table is set aside, not dropped: Takes with one of the
	// policies listed in inflight (matched by pointer: the *core.Policy a
	// [core.Limiter] passes, see core.Limiter.Policy) keep deciding on it, so
	// that requests already under way are decided wholly by the configuration
	// they started with. An in-flight policy that already has a table set
	// aside (by an earlier Replace) keeps that one; one whose configuration is
	// not the replaced table's is ignored (Take refuses it, as before). Call
	// [Store.Forget] with those policies once no request uses them; the
	// set-aside table is dropped when no policy holds it. When no in-flight
	// policy holds it, the replaced table is dropped at once. A set-aside
	// table counts towards the Store's policy cap and its Stats until then,
	// and keeps being swept.
	//
	// Replace is safe for concurrent use with Take. It returns an error for an
	// invalid policy, a configuration whose table does not fit the memory
	// budget, a new name beyond the policy cap, or after Close; the Store is
	// then unchanged.
	Replace(p *core.Policy, inflight ...*core.Policy) (bool, error)
	// Forget releases policies passed to [Store.Replace] as in flight: Takes
	// with them no longer find the table set aside for them (they decide on
	// the name's current table, or fail with the configuration error when it
	// holds another configuration). A set-aside table that no policy holds any
	// more is dropped with its keys. Policies that hold no set-aside table are
	// ignored, so Forget may be called with every policy a finished
	// generation of rules used.
	Forget(policies ...*core.Policy)
	// Registered is the number of policy names live Limiters have
	// registered on the store.
	Registered() int
	// Close stops the sweeper and makes later Takes return
	// core.ErrClosed. It is idempotent and always returns nil.
	Close() error
}

// memStore is the [Store] New returns.
type memStore struct {
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
	slots    // concurrency limits' slots (inflight.go)
}

var _ storekit.LocalStore = (*memStore)(nil)

// Option configures a Store.
type Option func(*memStore)

// WithMaxKeys caps the keys held per policy (default: what fits the memory
// budget, at most 4,194,304 (2^22)). n must be in (0, 2^32]. Given alone, it
// replaces the default budget; with WithMaxStateBytes, the smaller cap
// applies.
func WithMaxKeys(n int) Option { return func(s *memStore) { s.maxKeys = n } }

// WithMaxStateBytes sets the memory budget of each policy's table
// (default 512 MiB): the slots, the state and the per-shard
// buffers stay within n bytes. n must be > 0, and large enough for one key
// of each policy (Take returns an error naming the policy otherwise).
func WithMaxStateBytes(n int) Option {
	return func(s *memStore) { s.maxBytes, s.bytesSet = n, true }
}

// WithMaxPolicies caps the distinct policy names the Store holds tables
// for (default 1024). n must be > 0.
func WithMaxPolicies(n int) Option { return func(s *memStore) { s.maxPolicies = n } }

// WithClock sets the clock the sweeper uses to decide what has expired
// (default the system clock). Decisions use the time passed to Take.
func WithClock(c core.Clock) Option { return func(s *memStore) { s.clock = c } }

// WithSweepInterval sets how often the background sweeper runs (default
// one minute). d must be > 0.
func WithSweepInterval(d time.Duration) Option { return func(s *memStore) { s.interval = d } }

// New returns an empty Store and starts its sweeper. A configuration
// error returns a nil Store.
func New(opts ...Option) (Store, error) {
	s, err := newMem(opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newMem is New returning the concrete store.
func newMem(opts ...Option) (*memStore, error) {
	s := &memStore{
		seed:        maphash.MakeSeed(),
		maxBytes:    defaultMaxStateBytes,
		maxPolicies: defaultMaxPolicies,
		clock:       core.SystemClock{},
		interval:    defaultSweepInterval,
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
func MustNew(opts ...Option) Store {
	return mustNew(opts...)
}

// mustNew is MustNew returning the concrete store.
func mustNew(opts ...Option) *memStore {
	s, err := newMem(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Local reports true: Take never blocks on I/O.
func (s *memStore) Local() bool { return true }

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
func (s *memStore) Stats() Stats {
	st := Stats{Evictions: s.evictions.Load(), LimitedEvictions: s.limitedEvictions.Load()}
	for _, t := range *s.tables.Load() {
		st.Policies++
		st.Bytes += int64(allocBytes(tableSize))
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
func (s *memStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.done
	})
	return nil
}
