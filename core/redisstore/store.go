package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/redis/go-redis/v9"
)

// defaultPrefix is the key prefix used unless [WithPrefix] says otherwise.
const defaultPrefix = "limitkit:"

// ttlRoundPad is added to every key's TTL beyond the instant its state is back
// to full: it covers the rounding of microseconds up to Redis's
// milliseconds and the few microseconds between the script's TIME and the
// server's expiry clock. A key therefore lives at most its refill time
// (see the package doc) + ttlRoundPad.
const ttlRoundPad = time.Millisecond

// clientTimeSlack is added to every TTL under [WithClientTime]: the
// state's time is then the app server's, while Redis expires keys on its
// own clock, so a TTL needs room for request latency and clock-rate
// differences. A key that outlives its state is harmless (the state it
// holds is equivalent to a fresh one).
const clientTimeSlack = time.Second

// maxPrefix bounds the key prefix length.
const maxPrefix = 128

// maxCompiled bounds the per-policy cache (see Store.policy), so that
// callers creating a *Policy per request cannot grow memory without bound.
const maxCompiled = 4096

// tagLen is the length of the hash tag: 12 base64url characters, 72 bits
// of SHA-256 (a default key is 29 bytes, which keeps a single-limit GCRA,
// fixed window or token bucket key at 72 bytes of Redis memory).
const tagLen = 12

// Store is a [core.Store] keeping decision state in Redis.
//
// Every decision is one atomic Lua script (EVALSHA, falling back to EVAL
// when Redis has lost the script), so concurrent app servers never
// over-admit, and one network round trip, also for multi-limit policies.
// Time comes from the Redis server (TIME inside the script) unless the
// store was built with [WithClientTime]. Decisions are identical to
// (*core.Policy).Decide on the same sequence of (time, cost).
//
// The deadline of each call comes from its context, or from TakeBy's
// deadline (core.Limiter gives every call one); the client must have
// ContextTimeoutEnabled, which New checks, so a hung or dead Redis never
// blocks past it. TakeBy's deadline measures Redis's time, not the
// process's: it is moved later by the time the process itself recently
// waited to run (see TakeBy), so that a host starved of CPU does
// not turn healthy answers into timeouts and, under FailOpen, into bulk
// admissions.
//
// A Store holds no connections of its own, and no goroutines unless built
// with [WithPipelining] (the process's scheduler-latency probe, shared by
// every Store, runs while TakeBy is called and stops within two seconds
// after the last call): the caller owns the client and closes it. Build one with [New]; the zero Store is
// not usable. A Store is safe for concurrent use.
//
// Besides the methods below, the value New returns implements the optional
// store interfaces of package core that a [core.Limiter] (and the fleet
// tier in front of the store) find by type assertion: storekit.VerbStore,
// storekit.ReserveStore, storekit.ElasticStore, storekit.Refunder, storekit.SlotStore,
// storekit.BatchStore, storekit.DomainStore, storekit.PolicyRegistrar, and the
// deadline-bounded take a Limiter gives its per-call deadline to. They are
// core's business, reached through a Limiter, and not part of this
// package's API.
type Store interface {
	core.Store
	// Preload loads the scripts into Redis (on a Cluster or Ring, into
	// every shard) so that the first decisions, and the first calls of the
	// quota verbs (Peek, Charge, Credit, Reserve, Reset: their scripts are
	// loaded too), skip the EVAL fallback, which sends the whole script: each
	// is then one EVALSHA. Optional: without it, each shard loads a script
	// on first use, and again after a restart or SCRIPT FLUSH, invisibly.
	//
	// The single-limit GCRA, token bucket and fixed-window policies run a
	// copy of their script with their constants written in, built when the
	// policy is first used; Preload loads the copies built so far (and the
	// policies passed, which it builds first).
	Preload(ctx context.Context, policies ...*core.Policy) error
	// Keys returns the Redis keys holding key's state under p, one per limit,
	// all under one hash tag: prefix + "{" + 12 base64url characters of
	// SHA-256(policy name, NUL, key) + "}" + algorithm letter + limit index + 4
	// characters of a digest of the limit's parameters. The raw key never
	// reaches Redis. For inspection and tests.
	Keys(p *core.Policy, key string) ([]string, error)
	// Ping checks that Redis answers: PING to the node, or to every shard of a
	// Cluster or Ring. The fleet tier's circuit breaker uses it as its probe.
	// It is bounded by ctx's deadline.
	Ping(ctx context.Context) error
	// Check verifies that the store can decide, for use before serving: every
	// server (the node of a *redis.Client; each master of a *redis.ClusterClient,
	// whose cluster state must be ok; each shard of a *redis.Ring) answers
	// PING, runs Redis 5.0 or later, and holds every script of
	// the store (Check loads them, as [Store.Preload] does, and confirms with
	// SCRIPT EXISTS). A client of another type is checked as one server.
	//
	// Check also reads each server's persistence settings (CONFIG GET; a
	// server that refuses CONFIG is not judged) and warns, without failing,
	// through the store's logger ([WithLogger]), when they let a restart
	// forget the limits: appendonly no with save "" (a restart forgets every
	// key's state and each key gets its full quota again), appendonly no with
	// RDB snapshots (a crash forgets what was consumed since the last
	// snapshot, up to the save interval), appendfsync no (a crash may lose
	// the last ~30 s of writes). docs/redis.md's "Durability" section says what
	// to set.
	//
	// The first failure is returned as a *[CheckError] naming the server's
	// address, the step, the cause (a refused connection, a timeout, an
	// authentication error, ...) and what to do. ctx bounds the whole check;
	// give it a few seconds (the limiter's per-decision deadline is far too
	// short for dialling every server). Check is safe for concurrent use.
	Check(ctx context.Context) error
	// Registered is the number of policy names live Limiters have
	// registered on the store.
	Registered() int
}

// redisStore is the [Store] New returns.
type redisStore struct {
	client     redis.UniversalClient
	prefix     string
	clientTime bool
	ttlPad     int64 // ms
	reload     reloader
	logger     *slog.Logger // Check's warnings; nil: silent

	mu       sync.RWMutex
	compiled map[*core.Policy]*compiled

	reg storekit.PolicyRegistry // policy names of live Limiters (registrar.go)

	pipe *pipeliner // WithPipelining's batching; nil: one round trip per decision

	lag *schedlag.Probe // tests: an injected probe; nil: schedlag.Shared()
}

var _ core.Store = (*redisStore)(nil)

// Option configures a Store.
type Option func(*redisStore) error

// WithPrefix sets the prefix of every key (default "limitkit:",
// "limitkit:"). Use it to share one Redis between applications or
// environments. The prefix must not contain '{' or '}' (it would replace
// the per-key hash tag and put every key in one Cluster slot) and is at
// most 128 bytes; it may be empty.
func WithPrefix(prefix string) Option {
	return func(s *redisStore) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("redisstore: WithPrefix(%q): the prefix must not contain '{' or '}' (it would override the per-key hash tag)", prefix)
		}
		if len(prefix) > maxPrefix {
			return fmt.Errorf("redisstore: WithPrefix: prefix is %d bytes, at most %d", len(prefix), maxPrefix)
		}
		s.prefix = prefix
		return nil
	}
}

// WithClientTime makes the store decide at the now passed to Take (the
// Limiter's clock) instead of the Redis server's TIME. Use it in tests with
// a fake clock; in production it lets app servers with skewed clocks
// disagree, which the default (Redis TIME) avoids. TTLs then get one
// second more room (Redis expires keys on its own clock).
func WithClientTime() Option {
	return func(s *redisStore) error {
		s.clientTime = true
		return nil
	}
}

// WithLogger sets where [Store.Check] writes its warnings: settings of
// the servers that let Redis forget the limits' state (persistence off,
// snapshots only), at level WARN. The default is slog.Default(); nil
// silences them.
func WithLogger(l *slog.Logger) Option {
	return func(s *redisStore) error {
		s.logger = l
		return nil
	}
}

// New returns a Store over client: a *redis.Client (single node or
// Sentinel failover), *redis.ClusterClient or *redis.Ring, or any other
// UniversalClient.
//
// For the three go-redis client types New checks that ContextTimeoutEnabled
// is set in the client's options and fails otherwise: without it go-redis
// ignores context deadlines on socket reads and writes, and a hung Redis
// would hold requests for the client's ReadTimeout (seconds) instead of
// the limiter's deadline. For other implementations the caller guarantees
// that the context deadline is honoured.
//
// New does no I/O; the scripts are loaded on first use.
func New(client redis.UniversalClient, opts ...Option) (Store, error) {
	s, err := newRedis(client, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newRedis is New returning the concrete store.
func newRedis(client redis.UniversalClient, opts ...Option) (*redisStore, error) {
	if client == nil {
		return nil, errors.New("redisstore: New: nil client; pass a go-redis client (redis.NewClient, redis.NewClusterClient, ...)")
	}
	var ctxTimeout, known bool
	switch c := client.(type) {
	case *redis.Client:
		known, ctxTimeout = true, c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		known, ctxTimeout = true, c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		known, ctxTimeout = true, c.Options().ContextTimeoutEnabled
	}
	if known && !ctxTimeout {
		return nil, errors.New("redisstore: New: the client has ContextTimeoutEnabled false, so go-redis would ignore the limiter's per-call deadline and a hung Redis would block requests for ReadTimeout; set ContextTimeoutEnabled: true in the client options")
	}
	s := &redisStore{client: client, prefix: defaultPrefix, compiled: make(map[*core.Policy]*compiled), logger: slog.Default()}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redisstore: New: nil Option")
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.reload.cc, _ = client.(*redis.ClusterClient)
	s.ttlPad = ttlRoundPad.Milliseconds()
	if s.clientTime {
		s.ttlPad += clientTimeSlack.Milliseconds()
	}
	return s, nil
}

// Preload implements [Store.Preload].
func (s *redisStore) Preload(ctx context.Context, policies ...*core.Policy) error {
	for _, p := range policies {
		if _, err := s.policy(p); err != nil {
			return fmt.Errorf("redisstore: Preload: %w", err)
		}
	}
	for _, sc := range append(allScripts[:len(allScripts):len(allScripts)], bakery.all()...) {
		if err := sc.load(ctx, s.client); err != nil {
			return fmt.Errorf("redisstore: Preload: %w", err)
		}
	}
	return nil
}

// suffix is limit i's key suffix: the algorithm's letter, the index, and
// 4 base64url characters of a digest of what the stored state means (the
// algorithm, the limit, soft overage, buckets). A policy whose limit
// changes gets a fresh key rather than misreading state written under
// other parameters; a policy copy, or one that keeps its first limits,
// shares their state.
func suffix(p *core.Policy, i int) string {
	l := p.Limits[i]
	var lay []byte
	lay = append(lay, byte(p.Algorithm))
	if p.Algorithm == core.SlidingWindowLog {
		lay = append(lay, 2) // the ring layout (head, slots) replaced the entry list
	}
	for _, v := range []int64{int64(p.Buckets), int64(p.SoftPercent), l.Requests, int64(l.Window), l.Burst} {
		lay = binary.LittleEndian.AppendUint64(lay, uint64(v))
	}
	if p.Elastic != nil {
		// the ceiling sizes the state (the log's ring, the counter's
		// width) and lets it go above the limit: its own keys
		lay = append(lay, 'e')
		lay = binary.LittleEndian.AppendUint64(lay, uint64(p.Elastic.CeilingPercent))
	}
	sum := sha256.Sum256(lay)
	return string(algoLetters[p.Algorithm]) + strconv.Itoa(i) + base64.RawURLEncoding.EncodeToString(sum[:3])
}

// policy returns p's compiled form, from the cache when possible. The
// cache holds at most maxCompiled policies; when a new one finds it full it
// starts afresh, so callers that build a *Policy per call cannot grow it
// without bound, and cannot lock the long-lived policies out of it either.
func (s *redisStore) policy(p *core.Policy) (*compiled, error) {
	s.mu.RLock()
	c := s.compiled[p]
	s.mu.RUnlock()
	if c != nil {
		return c, nil
	}
	c, err := s.compile(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.compiled) >= maxCompiled {
		s.compiled = make(map[*core.Policy]*compiled)
	}
	s.compiled[p] = c
	s.mu.Unlock()
	return c, nil
}

// Keys implements [Store.Keys].
func (s *redisStore) Keys(p *core.Policy, key string) ([]string, error) {
	c, err := s.policy(p)
	if err != nil {
		return nil, err
	}
	return s.keys(c, key), nil
}

func (s *redisStore) keys(c *compiled, key string) []string {
	var kb [maxKeyBase]byte
	base := s.keyBase(kb[:0], c, key)
	keys := make([]string, len(c.suffixes))
	for i, suf := range c.suffixes {
		keys[i] = string(append(base, suf...))
	}
	return keys
}

// maxKeyBase bounds the bytes keyBase appends.
const maxKeyBase = maxPrefix + 2 + tagLen

// keyBase appends the part of key's Redis keys under c before the
// per-limit suffix, prefix + "{" + tag + "}", to dst.
func (s *redisStore) keyBase(dst []byte, c *compiled, key string) []byte {
	var hb [128]byte
	sum := sha256.Sum256(append(append(hb[:0], c.hashPre...), key...))
	dst = append(dst, s.prefix...)
	dst = append(dst, '{')
	dst = base64.RawURLEncoding.AppendEncode(dst, sum[:tagLen*3/4])
	return append(dst, '}')
}

// Take applies cost to key under p and returns the decision, in one Redis
// round trip. It decides at the Redis server's time, or at now under
// [WithClientTime]. A negative cost is treated as 0 (a peek that consumes
// nothing), as in (*core.Policy).Decide.
//
// The call is bounded by ctx's deadline. Errors (invalid policy, Redis
// failure or timeout, an unexpected reply) are returned as
// "redisstore: ..." wrapping the cause (context.DeadlineExceeded on a
// timeout), with a zero Decision.
func (s *redisStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.take(ctx, time.Time{}, key, p, now, cost)
}

// TakeBy is Take bounded by deadline as well as by ctx (a zero deadline
// is none): a core.Limiter calls it with its per-call deadline instead of
// Take under a context.WithTimeout, whose timer costs more than a
// pipelined call. Under [WithPipelining]
// a decision that queues has its deadline kept by the pipeliner, with
// no context of its own; without it, or sent at once, the call runs
// under a context bounded by deadline, as Take's.
//
// A starved host is not a dead store: deadline (the Limiter's store
// deadline, not ctx's, which is the caller's own) is moved later by the
// longest the process's goroutines waited to run in the last 500 ms, as
// a scheduler-latency probe measures it (a goroutine that asks to wake
// every 5 ms and records how late it woke, shared by every Store; the
// fleet tier runs one of its own by the same rule), by at most three times the deadline's own length (four
// in all: 200 ms for core.DefaultTimeout's 50 ms). On a host with CPU
// to spare the probe reads about 0 and nothing changes: a slow or
// stopped Redis still fails at the deadline; in a process that could
// not run, the time it could not run does not count against Redis.
// ctx's own deadline and cancellation still bound the call.
func (s *redisStore) TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	deadline = s.starvedDeadline(deadline)
	if s.pipe == nil && !deadline.IsZero() {
		if ctx == nil {
			ctx = context.Background()
		}
		var cancel context.CancelFunc
		ctx, cancel = withDeadline(ctx, deadline)
		defer cancel()
	}
	return s.take(ctx, deadline, key, p, now, cost)
}

// MoveDeadline returns the store deadline dl moved as TakeBy moves its
// own (later by the process's recent wait to run, at most three times
// the time left; the most until the probe has watched 500 ms): a
// core.Limiter gives the quota verbs (Peek, PeekDecision, Charge, Refund,
// Usage) this deadline. A zero dl is returned as is. Safe for concurrent
// use.
func (s *redisStore) MoveDeadline(dl time.Time) time.Time { return s.starvedDeadline(dl) }

// starvedDeadline returns dl moved later by the process's recent
// scheduling latency (see TakeBy and schedlag.Probe.Move).
func (s *redisStore) starvedDeadline(dl time.Time) time.Time {
	if dl.IsZero() {
		return dl
	}
	probe := s.lag
	if probe == nil {
		probe = schedlag.Shared()
	}
	return probe.Move(dl)
}

// take is Take and TakeBy: dl (zero: none) bounds the call besides ctx.
func (s *redisStore) take(ctx context.Context, dl time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if p == nil {
		return core.Decision{}, errors.New("redisstore: Take: nil policy")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return core.Decision{}, err
	}
	var vals []int64
	if s.pipe != nil {
		vals, err = s.pipe.take(ctx, dl, s, c, key, now, cost)
		if err != nil {
			err = s.failed(c, err)
		}
	} else {
		vals, err = s.run(ctx, c, s.args(c, c.tailAt(now), key, now, cost))
	}
	if err != nil {
		return core.Decision{}, err
	}
	return decision(c, vals, false)
}

var _ storekit.ElasticStore = (*redisStore)(nil)

// TakeElastic applies cost to key under the elastic policy p against its
// limits raised to the elastic ceiling (see storekit.ElasticStore), in one
// script call on the same keys as Take: one round trip, atomic with the
// state it counts against. For a policy without Elastic it is Take.
// Errors as Take.
func (s *redisStore) TakeElastic(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if p == nil {
		return core.Decision{}, errors.New("redisstore: TakeElastic: nil policy")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := s.policy(p)
	if err != nil {
		return core.Decision{}, err
	}
	if c.etail == nil {
		return s.Take(ctx, key, p, now, cost)
	}
	vals, err := s.run(ctx, c, s.args(c, c.etail, key, now, cost))
	if err != nil {
		return core.Decision{}, err
	}
	return decision(c, vals, true)
}

// run runs c's script with args once (see script.run), by ctx's
// deadline. An error asks a Cluster client to reload its slot map when
// it says the map may be stale, and comes back as "redisstore: policy
// ...: " wrapping the cause, a *ReplyError for an error reply.
func (s *redisStore) run(ctx context.Context, c *compiled, args []any) ([]int64, error) {
	var vals []int64
	var err error
	if s.pipe != nil {
		vals, err = s.pipe.run(ctx, s.client, c.script, args)
	} else {
		vals, err = c.script.run(ctx, s.client, args)
	}
	if err != nil {
		return nil, s.failed(c, err)
	}
	return vals, nil
}

// failed is what run and TakeBatch do with a call's error.
func (s *redisStore) failed(c *compiled, err error) error {
	s.reload.after(err)
	return fmt.Errorf("redisstore: policy %q: %w", c.p.Name, replyErr(err))
}

// decision builds the core.Decision from the script's reply, as core's
// Policy.decision does. The reply's remaining count is against the
// binding limit's effective capacity (the ceiling's, for an elastic
// take); the decision's is against its nominal one. The reply's sixth
// element, when present, is the elastic flag (see lua_generic.go).
func decision(c *compiled, v []int64, elastic bool) (core.Decision, error) {
	p := c.p
	if len(v) != 5 && len(v) != 6 || v[0] < 0 || v[0] > 1 || v[1] < 0 || v[1] >= int64(len(p.Limits)) ||
		v[2] < 0 || v[4] < -1 || len(v) == 6 && (v[5] < 0 || v[5] > 1) {
		return core.Decision{}, fmt.Errorf("redisstore: policy %q: unexpected script reply %v", p.Name, v)
	}
	d := core.Decision{
		Allowed:    v[0] == 1,
		Limit:      p.Limits[v[1]],
		ResetAfter: time.Duration(v[3]) * time.Microsecond,
		Policy:     p.Name,
	}
	flag := len(v) == 6 && v[5] == 1 && p.Elastic != nil
	if d.Allowed {
		if elastic {
			d.Remaining = max(0, v[2]-c.softE[v[1]])
			d.Elastic = flag
		} else {
			d.Remaining = max(0, v[2]-c.soft[v[1]])
		}
		return d, nil
	}
	d.ElasticRoom = flag && !elastic
	if v[4] == -1 {
		d.RetryAfter = core.Never
	} else {
		d.RetryAfter = time.Duration(v[4]) * time.Microsecond
	}
	if p.Shadow {
		d.Allowed, d.Shadowed = true, true
	}
	return d, nil
}
