package fleet

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/internal/schedlag"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storekit"
)

// localStore is what the tier uses of its embedded store (a
// memstore.Store, whose quota verbs and registrar core reaches by type
// assertion too).
type localStore interface {
	memstore.Store
	storekit.VerbStore
	storekit.PolicyRegistrar
}

// numShards is the number of independently locked parts of the local table.
const numShards = 64

// maxKeyLen is the longest key the local table holds: a request for a
// longer key is decided at the remote store every time (no deny cache, no
// lease), so hostile keys cannot make the bounded table large in bytes.
const maxKeyLen = 512

// maxWaits bounds how many lease requests of other requests one request
// waits for before it goes to the remote store itself.
const maxWaits = 4

// maxPolicies bounds the per-policy cache, as in the Redis store: callers
// building a *Policy per call cannot grow it without bound.
const maxPolicies = 4096

// Store is the fleet tier: a [core.Store] in front of a remote store
// (Redis, Redis Cluster) shared by many app servers. See the package
// documentation for the three layers and their guarantees.
//
// Build one with [New] and Close it when done; the zero Store is not
// usable. A Store is safe for concurrent use.
//
// Besides the methods below, the value New returns implements the optional
// store interfaces of package core that a [core.Limiter] finds by type
// assertion (storekit.FallbackStore, storekit.VerbStore, storekit.ReserveStore,
// storekit.ElasticStore, storekit.Refunder, storekit.SlotStore, storekit.PolicyRegistrar,
// and the deadline-bounded take a Limiter gives its per-call deadline to):
// they are core's business, reached through a Limiter, and not part of
// this package's API.
type Store interface {
	core.Store
	// Stats reports the tier's local store (its write-back entries,
	// leases and FailLocal shares): its key count and evictions, as
	// memstore.Store's Stats, so that metrics.Metrics.WatchMemstore can
	// export them.
	Stats() memstore.Stats
	// BreakerState returns the most open state over the tier's breakers
	// (one per failure domain of the remote store): "open" when one
	// domain's breaker is open, else "half_open" when one is probing,
	// else "closed".
	BreakerState() string
	// BreakerStates returns the state of each failure domain's breaker
	// the tier knows, by domain (a Cluster master's address; "" for the
	// remote store as a whole, or for keys whose domain is unknown), as
	// BreakerState names it.
	BreakerStates() map[string]string
	// Sync forwards the counts held locally now, in one round (the
	// background goroutine does it every WithSync interval); it returns
	// the first error.
	Sync(ctx context.Context) error
	// Close stops the background goroutines, forwards the counts still
	// held locally in one last sync of at most a second, and closes the
	// embedded fallback store. Later Takes return core.ErrClosed. Close
	// is idempotent; it does not close the remote store, which the
	// caller owns.
	Close() error
}

// fleetStore is the [Store] New returns.
type fleetStore struct {
	remote core.Store
	batch  storekit.BatchStore  // the remote's batch form, or nil
	by     deadlineStore        // the remote's TakeBy, or nil
	dstore storekit.DomainStore // the remote's failure domains, or nil
	cfg    config
	local  localStore // FailLocal decisions while the remote is unreachable
	dom    domains
	health *schedlag.Probe // the process's scheduling latency (health.go)
	seed   maphash.Seed

	openings atomic.Int64 // breaker openings, all domains

	pmu      sync.Mutex                              // serializes writers of policies
	policies atomic.Pointer[map[*core.Policy]*pinfo] // copy-on-write: readers take no lock

	shards   [numShards]shard
	shardCap int

	syncMu    sync.Mutex // one sync round at a time
	closed    atomic.Bool
	stop      chan struct{}
	life      context.Context // cancelled by Close: ends a watch call in flight
	endLife   context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var (
	_ core.Store             = (*fleetStore)(nil)
	_ storekit.FallbackStore = (*fleetStore)(nil)
)

// New returns a tier in front of remote and starts its background
// goroutines (sync rounds; the scheduler-latency monitor), which Close
// stops.
// Configuration mistakes are reported here.
func New(remote core.Store, opts ...Option) (Store, error) {
	s, err := newFleet(remote, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newFleet is New returning the concrete tier.
func newFleet(remote core.Store, opts ...Option) (*fleetStore, error) {
	if err := checkRemote(remote); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	local, err := memstore.New(memstore.WithClock(cfg.clock))
	if err != nil {
		return nil, fmt.Errorf("fleet: New: local store: %w", err)
	}
	ls, ok := local.(localStore)
	if !ok {
		return nil, fmt.Errorf("fleet: New: the embedded store %T lacks the quota verbs", local)
	}
	s := &fleetStore{
		remote:   remote,
		cfg:      cfg,
		local:    ls,
		seed:     maphash.MakeSeed(),
		shardCap: max(1, cfg.maxKeys/numShards),
		stop:     make(chan struct{}),
	}
	s.policies.Store(&map[*core.Policy]*pinfo{})
	s.batch, _ = remote.(storekit.BatchStore)
	s.by, _ = remote.(deadlineStore)
	s.dstore, _ = remote.(storekit.DomainStore)
	s.cfg.openings = &s.openings
	s.life, s.endLife = context.WithCancel(context.Background())
	if !s.cfg.noProbeLoop {
		s.cfg.wake = make(chan struct{}, 1)
	}
	s.dom.init(&s.cfg)
	s.health = schedlag.New()
	if s.cfg.lag != nil {
		s.health = s.cfg.lag
	}
	for i := range s.shards {
		s.shards[i].m = make(map[ekey]*entry)
	}
	if !s.cfg.noSyncLoop {
		s.wg.Add(1)
		go s.syncLoop()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.cfg.lag == nil {
			s.health.Run(s.stop)
		}
	}()
	if !s.cfg.noProbeLoop {
		s.wg.Add(1)
		go s.probeLoop()
	}
	return s, nil
}

// checkRemote refuses a remote store the tier cannot stand in front of:
// none, an embedded store, a tier.
func checkRemote(remote core.Store) error {
	if remote == nil {
		return errors.New("fleet: New: nil remote store; pass the Redis store (redisstore.New)")
	}
	if v := reflect.ValueOf(remote); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("fleet: New: the remote store is a nil %T (was the error from its constructor ignored?); check redisstore.New's error and pass the store it returns", remote)
	}
	if ls, ok := remote.(storekit.LocalStore); ok && ls.Local() {
		return errors.New("fleet: New: the remote store is an embedded store; the fleet tier belongs in front of a shared remote store (Redis)")
	}
	if _, ok := remote.(*fleetStore); ok {
		return errors.New("fleet: New: the remote store is already a fleet tier")
	}
	return nil
}

// newConfig applies opts over the defaults and resolves the default
// mode: write-back when WithSync is given, else exact.
func newConfig(opts []Option) (config, error) {
	cfg := config{
		maxLease:  defaultMaxLease,
		maxKeys:   defaultMaxKeys,
		threshold: defaultBreakerThreshold,
		coolDown:  defaultCoolDown,
		probe:     defaultProbeInterval,
		fleetSize: defaultFleetSize,
		failMode:  core.FailLocal,
		clock:     core.SystemClock{},
	}
	for _, o := range opts {
		if o == nil {
			return config{}, errors.New("fleet: New: nil Option")
		}
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return config{}, fmt.Errorf("fleet: New: %w", errors.Join(cfg.errs...))
	}
	if cfg.mode == core.ModeDefault {
		cfg.mode = core.ModeExact
		if cfg.sync > 0 {
			cfg.mode = core.ModeWriteBack
		}
	}
	return cfg, nil
}

// FallsBackLocally reports true: for a policy with core.FailLocal the tier
// decides from its embedded store when the remote store fails.
func (s *fleetStore) FallsBackLocally() bool { return true }

// Stats reports the tier's local store (its write-back entries, leases
// and FailLocal shares): its key count and evictions, as
// memstore.Store.Stats, so that metrics.Metrics.WatchMemstore can export
// them. Safe for concurrent use.
func (s *fleetStore) Stats() memstore.Stats { return s.local.Stats() }

// Close stops the background goroutines, forwards the counts still held
// locally (denied requests under CountDenied, fallback admissions) in one
// last sync of at most a second (skipping the domains whose breaker is
// open: those counts are lost), and closes the embedded fallback store.
// Later Takes return core.ErrClosed. Close is idempotent; it does not
// close the remote store, which the caller owns.
func (s *fleetStore) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.endLife()
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.closeErr = s.Sync(ctx)
		cancel()
		s.closed.Store(true)
		if err := s.local.Close(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// BreakerState returns the most open state over the tier's breakers (one
// per failure domain of the remote store): "open" when one domain's
// breaker is open, else "half_open" when one is probing, else "closed".
func (s *fleetStore) BreakerState() string { return s.dom.worst().String() }

// BreakerStates returns the state of each failure domain's breaker the
// tier knows, by domain (a Cluster master's address; "" for the remote
// store as a whole, or for keys whose domain is unknown).
func (s *fleetStore) BreakerStates() map[string]string {
	m := make(map[string]string)
	for d, st := range s.dom.states() {
		m[d] = st.String()
	}
	return m
}

// breakerOpenings returns how many times a breaker of the tier opened
// (closed → open), over every domain, since New.
func (s *fleetStore) breakerOpenings() int64 { return s.openings.Load() }

// breakerFor returns the breaker of key's failure domain under p.
func (s *fleetStore) breakerFor(key string, p *core.Policy) *breaker {
	if s.dstore == nil {
		return &s.dom.def
	}
	return s.dom.get(s.dstore.Domain(key, p))
}

// Take decides cost for key under p at now (see core.Store): from the deny
// cache or a lease when it can, else at the remote store; while the
// breaker is open, by the policy's fail mode. now is the request's start;
// the remote store may decide at its own clock (the Redis store does unless
// WithClientTime).
//
// Errors: an invalid policy; core.ErrClosed after Close; the remote
// store's error wrapped by "fleet: "; and, while the breaker is open, an
// error wrapping core.ErrCircuitOpen. With an error, the decision is zero
// (the Limiter applies its policy's fail mode) unless the policy fails
// local (FailLocal, or no fail mode under WithDefaultFailMode's default):
// then it is the embedded store's Degraded decision with each limit
// divided by the fleet size; or fails closed (FailClosed, or no fail mode
// under WithDefaultFailMode(core.FailClosed)): then it is a Degraded
// denial.
func (s *fleetStore) Take(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	return s.take(ctx, time.Time{}, key, p, now, cost)
}

// take is Take, with TakeBy's deadline (zero: none) applied only when the
// request goes to the remote store or waits for a lease: a decision from
// the deny cache or a lease builds no context and no timer.
func (s *fleetStore) take(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if p == nil {
		return core.Decision{}, errors.New("fleet: Take: nil policy")
	}
	if s.closed.Load() {
		return core.Decision{}, core.ErrClosed
	}
	pi, err := s.info(p)
	if err != nil {
		return core.Decision{}, err
	}
	cost = min(max(cost, 0), pi.maxCost)
	t := now.UnixMicro()
	if len(key) > maxKeyLen || pi.elastic {
		return s.remoteTake(ctx, deadline, nil, nil, ekey{p: p, key: key}, pi, now, t, cost, 0, 0)
	}
	bounded := deadline.IsZero()
	k := ekey{p: p, key: key}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	var pending, grab int64
	var e *entry
	for waits := 0; ; waits++ {
		sh.mu.Lock()
		e = sh.m[k]
		if e == nil {
			e = sh.insertFor(k, pi, cost, s.shardCap)
			break
		}
		e.ref = true
		if s.deniesCached(e, pi, t, cost) {
			d := e.denied(t)
			d.Cached = true
			if pi.countDenied {
				e.pending = min(e.pending+cost, pi.maxCost)
				sh.queue(e)
			}
			sh.mu.Unlock()
			if o := s.cfg.observer; o != nil {
				o.Observe(core.Event{Kind: core.EventDenyCacheHit, Context: ctx, Policy: p.Name, Decision: d})
			}
			return d, nil
		}
		if pi.writeBack && cost > 0 {
			t = e.leaseTime(pi, t)
			if e.lease >= cost && t >= e.leaseAt && t < e.leaseUntil {
				d := e.takeLease(t, cost)
				sh.queue(e)
				sh.mu.Unlock()
				return d, nil
			}
			if ch := e.grab; ch != nil && waits < maxWaits {
				sh.mu.Unlock()
				if !bounded {
					var cancel context.CancelFunc
					ctx, cancel = s.bound(ctx, deadline)
					defer cancel()
					bounded = true
				}
				waitGrab(ctx, ch)
				continue
			}
			grab = e.startLease(pi, t)
		}
		pending, e.pending = e.pending, 0
		break
	}
	sh.mu.Unlock()
	if bounded {
		deadline = time.Time{} // ctx holds it, or there is none
	}
	return s.remoteTake(ctx, deadline, sh, e, k, pi, now, t, cost, pending, grab)
}

// waitGrab waits for the end of another request's lease request for the
// key (rather than making one more round trip), or for ctx's.
func waitGrab(ctx context.Context, ch chan struct{}) {
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

var _ storekit.ElasticStore = (*fleetStore)(nil)

// TakeElastic is the elastic take of an elastic policy (see
// storekit.ElasticStore), passed to the remote store, which must implement
// storekit.ElasticStore (the Redis store does). Elastic policies are decided
// at the remote store on every request, in both takes (no deny cache, no
// lease: the ceiling and its hint are exact only there), through the
// breaker: while it is open, TakeElastic fails at once and the Limiter
// keeps the hard decision. Errors as Take, and one naming a remote store
// that cannot decide elastic policies.
func (s *fleetStore) TakeElastic(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if p == nil {
		return core.Decision{}, errors.New("fleet: TakeElastic: nil policy")
	}
	if s.closed.Load() {
		return core.Decision{}, core.ErrClosed
	}
	pi, err := s.info(p)
	if err != nil {
		return core.Decision{}, err
	}
	es, ok := s.remote.(storekit.ElasticStore)
	if !ok {
		return core.Decision{}, fmt.Errorf("fleet: policy %q is elastic, and the remote store %T does not implement storekit.ElasticStore", p.Name, s.remote)
	}
	b := s.breakerFor(key, p)
	if !b.allow() {
		return core.Decision{}, fmt.Errorf("fleet: %w", core.ErrCircuitOpen)
	}
	start := s.health.Now()
	d, err := es.TakeElastic(ctx, key, p, now, min(max(cost, 0), pi.maxCost))
	s.report(ctx, b, err, start)
	if err != nil {
		return core.Decision{}, fmt.Errorf("fleet: %w", err)
	}
	return d, nil
}

// remoteTake decides at the remote store, first forwarding pending
// locally denied cost (CountDenied) and asking for grab leased units,
// bounded by ctx and by dl (TakeBy's deadline; zero: none).
//
// A remote store with its own TakeBy (the Redis store) is handed dl for
// a lone take, and bounds the call itself: no context, no timer (which
// a pipelined Redis store would otherwise pay for every decision). It
// moves dl later by the process's recent wait to run, by the rule the
// tier's bound applies (schedlag.Probe.Move). Any other call runs under
// ctx bounded by dl (bound).
func (s *fleetStore) remoteTake(ctx context.Context, dl time.Time, sh *shard, e *entry, k ekey, pi *pinfo, now time.Time, t, cost, pending, grab int64) (core.Decision, error) {
	p := pi.p
	grabbing := grab > 0 // e's lease request in flight is ours to end
	b := s.breakerFor(k.key, p)
	if !b.allow() {
		s.undo(sh, e, pending, grabbing)
		return s.fallback(ctx, k.key, pi, now, cost, core.ErrCircuitOpen)
	}
	var moved time.Time // dl as bound would move it, for classify
	if !dl.IsZero() {
		if s.by != nil && pending == 0 {
			moved = s.health.Move(dl)
		} else {
			var cancel context.CancelFunc
			ctx, cancel = s.bound(ctx, dl)
			defer cancel()
			dl = time.Time{}
		}
	}
	var d core.Decision
	var err error
	start := s.health.Now()
	if pending > 0 {
		b := [2]storekit.BatchTake{
			{Key: k.key, Policy: p, Now: now, Cost: pending},
			{Key: k.key, Policy: p, Now: now, Cost: cost + grab},
		}
		if err = s.takeBatch(ctx, b[:]); err == nil {
			if b[0].Err == nil {
				pending = 0 // forwarded
				s.chargeRest(ctx, k.key, pi, now, b[0].Decision, b[1])
			}
			d, err = b[1].Decision, b[1].Err
		}
	} else {
		d, err = s.takeRemote(ctx, dl, k.key, p, now, cost+grab)
	}
	if err == nil && grab > 0 && (!d.Allowed || d.Shadowed) && !pi.countDenied {
		// The lease did not fit: decide the request alone, exactly.
		grab = 0
		d, err = s.takeRemote(ctx, dl, k.key, p, now, cost)
	}
	rctx := ctx
	if err != nil && !moved.IsZero() {
		// classify reads the call's deadline from its context, as the
		// bounded call's would have carried it
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, moved)
		defer cancel()
	}
	if s.report(rctx, b, err, start) == outage {
		probe := k // a copy: k itself stays on the stack of every other call
		b.probe.Store(&probe)
	}
	if err != nil {
		s.undo(sh, e, pending, grabbing)
		if cancelled(ctx) {
			return core.Decision{}, fmt.Errorf("fleet: %w", err)
		}
		return s.fallback(ctx, k.key, pi, now, cost, err)
	}
	if d.Allowed && !d.Shadowed {
		s.chargeLocal(ctx, k.key, pi, now, cost+grab)
	}
	if pending > 0 {
		s.undo(sh, e, pending, false) // the forward failed alone: keep it for the next sync
	}
	granted := grab > 0 && d.Allowed && !d.Shadowed
	if granted {
		d.Remaining += grab
	}
	s.record(sh, e, k, pi, t, cost, d, grab, granted, grabbing)
	return d, nil
}

// takeRemote is the remote store's Take, or its TakeBy with dl when dl
// is set (remoteTake sets it only for a remote with TakeBy).
func (s *fleetStore) takeRemote(ctx context.Context, dl time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error) {
	if !dl.IsZero() {
		return s.by.TakeBy(ctx, dl, key, p, now, cost)
	}
	return s.remote.Take(ctx, key, p, now, cost)
}

// deadlineStore is a remote store that bounds its calls by a deadline it
// is given as a time (core's Limiter hands one to the stores with this
// method; the Redis store has it).
type deadlineStore interface {
	TakeBy(ctx context.Context, deadline time.Time, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
}

// takeBatch sends b in one round trip when the remote can batch, else one
// Take per entry.
func (s *fleetStore) takeBatch(ctx context.Context, b []storekit.BatchTake) error {
	if s.batch != nil {
		return s.batch.TakeBatch(ctx, b)
	}
	failed := 0
	var last error
	for i := range b {
		b[i].Decision, b[i].Err = s.remote.Take(ctx, b[i].Key, b[i].Policy, b[i].Now, b[i].Cost)
		if b[i].Err != nil {
			failed++
			last = b[i].Err
		}
	}
	if failed == len(b) && last != nil {
		return last
	}
	return nil
}

// undo puts back what a failed remote call took from the entry: the
// pending denied cost (counted at a later sync) and the grab in flight.
func (s *fleetStore) undo(sh *shard, e *entry, pending int64, grabbing bool) {
	if e == nil || pending == 0 && !grabbing {
		return
	}
	sh.mu.Lock()
	if pending > 0 {
		e.pending += pending
		sh.queue(e)
	}
	if grabbing {
		e.endGrab()
	}
	sh.mu.Unlock()
}

// chargeRest completes a forward of fallback admissions that the remote
// store denied for want of room: it takes what the remote store has left
// (after the entry decided next, when there is one), so that the window's
// remote admissions and the tier's local ones add up to the limit at
// most. CountDenied policies counted the denied forward already.
func (s *fleetStore) chargeRest(ctx context.Context, key string, pi *pinfo, now time.Time, fw core.Decision, next storekit.BatchTake) {
	if pi.countDenied || fw.Allowed || fw.Shadowed {
		return
	}
	rest := fw.Remaining
	if next.Err == nil && next.Cost > 0 {
		rest = next.Decision.Remaining
	}
	if rest > 0 {
		_, _ = s.remote.Take(ctx, key, pi.p, now, rest)
	}
}

// cancelled reports whether ctx's caller cancelled it (not a deadline):
// its request is then not decided at all.
func cancelled(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// chargeLocal charges n units admitted by the remote store to the key's
// share in the embedded fallback store (FailLocal policies), as far as the
// share has room: a tier that falls back later in the window admits
// locally only what is left of its share after what it admitted remotely.
func (s *fleetStore) chargeLocal(ctx context.Context, key string, pi *pinfo, now time.Time, n int64) {
	if pi.failMode != core.FailLocal || pi.local == nil || n <= 0 {
		return
	}
	s.chargeShare(ctx, key, pi.local, now, n)
	s.chargeShare(ctx, key, pi.flap, now, n)
}

// record stores what a remote decision teaches about the key: a denial
// for the deny cache (replacing any cached one), a granted lease.
func (s *fleetStore) record(sh *shard, e *entry, k ekey, pi *pinfo, t, cost int64, d core.Decision, grab int64, granted, grabbing bool) {
	if sh == nil {
		return // a key too long for the table
	}
	deny := pi.denyCache && cost > 0 && (!d.Allowed || d.Shadowed) && d.RetryAfter > 0
	if e == nil && !deny {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e == nil {
		e = sh.m[k]
		if e == nil {
			e = sh.insert(k, pi, s.shardCap)
		}
	}
	e.denyCost = 0
	if deny {
		until := t + d.RetryAfter.Microseconds()
		if d.RetryAfter == core.Never || until < t {
			// no wait admits this cost: valid while the policy stands,
			// bounded here by the time the key is full again
			until = t + max(d.ResetAfter.Microseconds(), 1)
		}
		e.denyCost, e.denyAt, e.denyUntil, e.deny = cost, t, until, d
	}
	e.last = d
	e.lastAt = t
	if d.Allowed && !d.Shadowed {
		e.remaining = d.Remaining
		if granted {
			e.remaining -= grab // the remote store's own remaining (the decision adds the lease)
		}
	} else {
		e.remaining = 0
	}
	if grabbing {
		e.endGrab()
	}
	if granted {
		e.grant(pi, t, grab, d)
	}
}

// fallback decides without the remote store: the embedded store for a
// policy failing local (FailLocal, or FailOpen read as the tier's default
// fail mode), a Degraded denial for one failing closed (FailClosed, or
// FailOpen read as the tier's default), else a zero decision and an error
// for the Limiter's fail mode (open). A local admission is owed to the remote store: its cost is
// forwarded (as the pending count) with the key's next remote decision or
// sync round, so that the remote store's window counts it.
func (s *fleetStore) fallback(ctx context.Context, key string, pi *pinfo, now time.Time, cost int64, cause error) (core.Decision, error) {
	err := fmt.Errorf("fleet: %w", cause)
	if pi.failMode == core.FailClosed {
		// Denied here, not by the Limiter: a policy that sets no fail
		// mode reads as FailOpen there, but fails closed when the tier's
		// WithDefaultFailMode says so.
		return core.Decision{Policy: pi.p.Name, Degraded: true, RetryAfter: time.Second}, err
	}
	if pi.failMode != core.FailLocal || pi.local == nil {
		return core.Decision{}, err
	}
	d, lerr := s.localTake(ctx, key, pi, now, cost)
	if lerr != nil {
		return core.Decision{}, errors.Join(err, lerr)
	}
	d.Degraded, d.Policy = true, pi.p.Name
	if d.Allowed && !d.Shadowed && cost > 0 && len(key) <= maxKeyLen && !pi.elastic {
		s.owe(key, pi, cost)
	}
	if o := s.cfg.observer; o != nil {
		o.Observe(core.Event{Kind: core.EventFallback, Context: ctx, Policy: pi.p.Name, Decision: d, Err: err})
	}
	return d, err
}

// owe adds cost admitted by the fallback to the key's pending count.
func (s *fleetStore) owe(key string, pi *pinfo, cost int64) {
	k := ekey{p: pi.p, key: key}
	sh := &s.shards[maphash.String(s.seed, key)%numShards]
	sh.mu.Lock()
	e := sh.m[k]
	if e == nil {
		e = sh.insert(k, pi, s.shardCap)
	}
	e.pending = min(e.pending+cost, pi.maxCost)
	sh.queue(e)
	sh.mu.Unlock()
}
