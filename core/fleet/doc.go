// Package fleet is a local tier in front of a remote store shared by a
// fleet of app servers (the Redis store on a node or a Cluster): it
// answers what it can without a round trip and keeps deciding when the
// remote store is down. It works with every algorithm, every adapter,
// hybrid checks and the rules package: it is a [core.Store], and it reads
// its per-policy settings (core.Policy.Mode, Sync, FleetSize) from the
// policy passed to Take.
//
//	rs, _ := redisstore.New(client)
//	tier, _ := fleet.New(rs, fleet.WithSync(100*time.Millisecond), fleet.WithFleetSize(8))
//	defer tier.Close()
//	lim := core.MustNewLimiter(tier, core.Policy{Name: "api", FailMode: core.FailLocal,
//		Limits: []core.Limit{core.PerMinute(600)}})
//
// It has three layers, each with its own guarantee.
//
// # Deny cache (exact)
//
// When the remote store denies a key with RetryAfter r to a request that
// started at now, the tier denies requests for that (policy, key) of the
// same cost until now + r without a round trip, with the remote decision's
// fields (RetryAfter and ResetAfter shortened by the time elapsed). It
// admits nothing the remote store would not: RetryAfter is the exact wait
// if nothing else is consumed, other servers can only consume more (which
// makes the true wait longer), and now is read before the round trip, so
// the local expiry is never later than the remote one. With one server,
// every cached decision equals the one the remote store would have given
// (TestExactEqualsPlainRedis compares them decision by decision). A cost
// above the policy's capacity (RetryAfter core.Never) is cached until the
// key would be full again. Any remote decision for the key replaces the
// cached one. In write-back mode a cached denial also answers requests of
// a larger cost (denied as well; their RetryAfter is then the cached one,
// which may be shorter than the true wait).
//
// CountDenied: in exact mode the deny cache does not serve CountDenied
// policies, because every denial changes the remote state (the remote
// store counts it) and exact mode promises the remote store's decisions.
// In write-back mode, or with WithDeferredDenialCounts, it does: the cost of each locally denied request is
// added to a per-key pending count (capped at the largest capacity + 1,
// beyond which the remote store counts alike), which is forwarded to the
// remote store as one take of the summed cost — in the next sync round
// (batched with every other key), before the key's next remote decision
// (in the same round trip), and at Close. The remote store then counts
// those units at the forwarding instant rather than at each request's:
// the lock-out can only get longer (by at most one sync interval), and
// meanwhile another server may admit what a remote store counting at once
// would have denied — at most the units the policy refills in one sync
// interval.
//
// # Write-back with leases (bounded error)
//
// In write-back mode (core.ModeWriteBack, or the tier default with
// WithSync > 0) a hot key is decided locally from quota leased from the
// remote store. The first request for a key goes to the remote store
// (loading its state). Afterwards a request that finds no lease takes
// cost + L units in one remote take (L = the lease, which grows by
// doubling while the key stays hot, up to the lease cap, and never above
// half of what the remote store last reported remaining, so a nearly
// exhausted key goes exact); when that is denied the request is decided
// alone, exactly (under CountDenied it is not retried, so as not to count
// it twice: an under-admission). Requests that find the lease empty while
// such a lease request is in flight wait for it (for at most 4 of them)
// instead of each making a round trip. Locally admitted requests spend
// leased units. Leases expire one sync interval after they were taken, and for
// the fixed window never later than the end of the window they were
// charged in; unused units are then lost (under-admission, at most the
// lease cap per key per server per interval). Every sync interval one
// round trip (a pipeline; one per node on a Cluster) renews the leases of
// the keys used since the last round that hold less than half their lease
// size, forwards pending CountDenied counts, and drops expired leases.
// Sync rounds run at the tier's interval (WithSync, else
// 100 ms); a policy's own Sync sets how long its leases
// live.
// The local table holds at most WithMaxKeys entries (CLOCK eviction;
// evicting loses a lease or a cached denial, never admits more).
//
// Error bound. Every admitted unit was charged at the remote store no
// later than it was admitted, so the fleet never admits more units in
// total than the remote store charged; and with N servers and a lease cap
// of C units per key (C = min(WithMaxLease, smallest capacity / (4 ×
// fleet size)), never more than half of the remaining quota), in every
// interval of a limit's window length W
//
//	admitted(W) ≤ exact(W) + N × C
//
// where exact(W) is what the exact remote store admits in that interval
// (the leases outstanding at its start are the only units charged before
// it). For the fixed window the extra term is 0: leases never cross a
// window boundary, so each window admits at most its limit. With N equal
// to the configured fleet size the extra is at most a quarter of the
// smallest limit. TestWriteBackOverAdmissionBound and
// TestWriteBackBoundRedis assert it for every algorithm and report the
// worst excess observed next to the bound. The remote store's clock
// decides windows unless the Redis store runs WithClientTime: the
// fixed-window guarantee then assumes the app servers' clocks agree with
// Redis's to within the remote decision's ResetAfter (the lease ends at
// min(local window end, now + ResetAfter)).
//
// A locally admitted decision carries the last remote decision's Limit,
// an estimate of Remaining (the remote store's remaining after the lease
// was taken plus the units still leased here) and of ResetAfter (the last
// remote one less the time elapsed).
//
// # Circuit breakers per failure domain
//
// The tier keeps one breaker per failure domain of the remote store: a
// remote store implementing storekit.DomainStore names each key's domain (the
// Redis store on a Cluster client: the master serving the key's slot,
// from go-redis's cached slot map, no I/O); on a node, Sentinel or Ring
// the whole store is one domain. Breakers are created on first use (at
// most 256; further domains share one) and a closed breaker unused for a
// minute is reclaimed, so the addresses of masters that went away after a
// failover do not accumulate. One dead master opens only its own
// breaker: the keys of the masters that answer keep being decided by
// Redis, never by a fail mode. Sync rounds skip the keys of open domains
// and report each entry's outcome to its own domain.
//
// Only an outage counts towards a breaker: a connection failure, or a
// timeout. An error reply (out of memory, a script error, CLUSTERDOWN,
// MOVED, TRYAGAIN — whatever core.ClassifyError does not classify as
// timeout or connection) means the domain answered: the request gets its
// fail mode, the breaker is not touched. Under maxmemory with noeviction,
// Redis still denies exhausted clients (a denial writes nothing), and so
// does the tier. A timeout that the process's own starvation explains is
// forgiven for as long as the domain answered some call within the last
// 3 seconds: a process too busy to read its replies is not a store that
// is down (under a CPU-saturated host, with other load beside it, a
// healthy Redis's answers were seen more than a second apart). The tier
// tells the two apart with a scheduler-latency probe (a goroutine that
// asks to wake every 5 ms and records how late it woke): a timed-out call
// is forgiven only when, during that call, the process waited to run at
// least half the time the call had (its deadline less its start). A busy
// process whose goroutines still ran within that — it waited 10 or 20 ms
// to run, and the store gave no answer in 50 — has seen a store that did
// not answer: an outage, as on an idle host, so a stopped Redis opens its
// breaker after the threshold of timeouts whatever the load. A store that
// is down in a process starved beyond that opens its breaker up to 3
// seconds later. A request its caller cancelled says nothing either.
//
// A slow Redis is not a dead one either: on a busy host the redis-server
// beside the app is starved too, and stalls for hundreds of
// milliseconds while the app's own goroutines run. Two rules
// keep such a stall from failing open in bulk. The outages of one wave
// count once: a call that started before the last counted outage was
// seen was in flight with it, and its timeout is the same stall seen
// again (the four requests in flight when the stall begins time out
// together; counted alone, they passed the threshold of three). A
// stopped Redis therefore opens the breaker after the threshold's waves:
// three store deadlines with concurrent callers (as many calls, for a
// serial caller, as before). And while a breaker that opened on
// timeouts cools down, the tier keeps one call in flight to the domain,
// the watch (the last failed key at cost 0, bounded by the cool-down
// and the client's socket timeouts, then sent again): a reply that
// arrives late proves the domain alive, and closes the breaker (open →
// closed) when the stall ends instead of after the cool-down. A stopped
// Redis never replies, and its breaker stays open as before; a refused
// connection (a Redis that is gone) is not watched. What a stall admits
// is the fail mode's while it lasts: each request that times out, and
// each one decided while the breaker is open, is Degraded (under
// FailOpen, admitted without limit, and reported as such; under
// FailLocal, within the bounds below).
// The deadline a Limiter gives the tier (TakeBy) is moved later
// by the process's recent wait to run, at most three times its length,
// as the Redis store's is: on a starved host fewer calls time out.
//
// After WithBreaker's threshold of consecutive outages the breaker opens:
// for the cool-down no request calls that domain, so none waits for the
// store deadline. Then it is probed with a real decision, never PING (a
// Redis under CLIENT PAUSE WRITE, as during FAILOVER, answers PING while
// its scripts hang): every probe interval a background goroutine replays
// the key of the domain's last failed request at cost 0 (the decision
// script, consuming nothing), and a request arriving when a probe is due
// is let through as the probe. An answer closes the breaker; an outage
// reopens it for one probe interval.
//
// While a domain's breaker is open, and for a request whose remote call
// failed, a request is decided by its fail mode. Cached denials keep being
// served under every fail mode, FailOpen included; leased units keep
// being spent (they were charged already). FailOpen is core.Policy's zero
// value, which the tier cannot tell from an unset fail mode: under the
// tier such policies fail local unless WithDefaultFailMode says otherwise.
// FailLocal decides by an embedded store (core/memstore, one per tier)
// with each limit's Requests and Burst divided by the fleet size N (the
// policy's FleetSize, else WithFleetSize; rounded down, at least 1),
// returned Degraded with an error wrapping the cause (core.ErrCircuitOpen
// while open). That local share is one budget with what the tier admits
// remotely: every remote admission (and lease) of the tier is charged to
// its local share too, and every local admission is forwarded to the
// remote store (with the key's next remote decision or the next sync
// round, like the CountDenied counts; when the remote store denies the
// forward for want of room, what it has left is charged instead). A
// FailClosed policy gets a zero decision and the error, and the Limiter
// denies.
//
// Flap share. A tier cut off from the remote store (a call timed out, its
// breaker cooling down) admits from its share what the remote store does
// not know about yet, while the store keeps admitting the tiers it
// answers up to the limit; under a flapping store some tiers are cut off
// in every window (1.46–1.75 L per window was measured with 4 tiers). So
// until the domain has failed every call of this tier for the flap
// horizon H (WithFlapHorizon: 10 s, at least twice the
// cool-down plus two probe intervals; any answer, probes included, starts
// it over), a local admission must also fit in the flap share, a quarter
// of the local share (each limit divided by 4N, at least 1), to which the
// tier's remote admissions are charged too. While the store flaps, the
// tiers cut off at any moment then add at most L/4 to the store's L. The
// price is availability in the first H of a real outage: a quarter of
// the fleet's limit per window, the full share after H.
//
// Bounds. Over the fleet, in every window of a limit of L per window, with
// N tiers (N = the fleet size) and C the write-back lease cap:
//
//	fail mode                     admitted per window, whatever fails
//	FailClosed                    L in exact mode; L + N×C in write-back (L for the fixed window)
//	FailLocal (default)           while the store flaps (it answered every tier within the flap
//	                              horizon): 1.25L (Redis admits L, each tier cut off at most its
//	                              flap share L/(4N)), L + N when L < 4N, + N×C in write-back;
//	                              whatever fails:
//	                              2L at most (Redis admits L, each tier at most its local share
//	                              L/N), + N×C in write-back; 2L − L/N when no remote decision is
//	                              in flight as a tier falls back (a tier's remote admissions
//	                              are charged to its share, so one tier spends both at most);
//	                              L + N (+ N×C) when every tier's local admissions reach Redis
//	                              in the window while it has room
//	FailOpen (WithDefaultFailMode) unbounded while a domain is down or its calls fail;
//	                              cached denials still deny
//
// The windows are those of one clock: a tier's local share counts on the
// time its Limiter passes, the Redis store on Redis's TIME (unless
// redisstore.WithClientTime). Under a fixed window with the two clocks
// apart, one of Redis's windows overlaps two local ones, and a tier may
// spend what was left of one share and the next within it: up to twice
// its share there (1.5L while flapping, 3L at most).
//
// TestFailLocalBoundSteps walks the FailLocal terms step by step on a fake
// clock (175 and 104 of a limit of 100 with 4 tiers, the flap share off);
// TestFlapShareAfterHorizon the flap share's; TestFlappingStoreFailLocalBoundSim
// checks 1.3L per window under scripted flaps on a fake store, and
// TestFlappingRedisFailLocalBoundStop against a Redis stopped and continued
// every 100 ms; TestFlappingRedisFailLocalBound, TestSaturatedHostKeepsTheBound and
// TestClusterMasterDownAffectsOnlyItsKeys check the bounds against real
// Redis servers (a flapping Redis, a starved process, a SIGSTOPped Cluster
// master).
//
// # Elastic policies
//
// A policy with core.Policy.Elastic is decided at the remote store on
// every request, both its nominal take and its elastic take
// (TakeElastic), whatever the mode: no lease (local admissions would not
// count against the ceiling) and no deny cache (a cached denial would
// outlive the ceiling's room, which returns sooner than the nominal
// limit's). Its decisions are therefore exactly the remote store's, at
// one round trip per take, through the breaker; while the breaker is
// open, a FailLocal elastic policy is decided by the embedded store with
// the divided limits and no elasticity.
//
// # Quota verbs
//
// The tier implements storekit.VerbStore and storekit.ReserveStore, so a
// Limiter's Peek, Reset, Charge, Refund and Wait work through it, each one
// round trip to the remote store (Reserve: the remote store's
// reservation, so waiters on every server queue at Redis). They go
// through the same failure handling as decisions: the breaker of the
// key's failure domain (while it is open the remote store is not called
// and the verb fails at once with core.ErrCircuitOpen; an outage counts
// towards it, a caller's own cancellation does not), and the fail mode.
// Under FailLocal, Peek, Charge and Refund act on the key's share in the
// embedded store and return its Degraded decision with the error (a
// charge is owed to the remote store like a fallback admission, a refund
// first cancels what is still owed), Wait is admitted by the fallback,
// and Reset resets the share and returns the error; under the other fail
// modes the Limiter applies the fail mode (a charge or refund is then
// lost). A Reset drops this server's cached denial, lease and pending
// counts at once; every other server honours it within the deny cache's
// bound, WithDenyCacheTTL (1 s by default): a cached denial is
// served at most that long without asking the remote store again.
//
// # Events
//
// WithObserver receives core.EventDenyCacheHit (per cached denial, with
// the decision), core.EventSync (per sync round trip: Keys entries,
// Latency, Err), core.EventBreaker (every transition, From → To) and
// core.EventFallback (per FailLocal decision). No event carries a key.
// A deny-cache hit and a fallback carry the request's context (the one
// the Limiter passed to Take), so an exporter can put them on the
// request's trace; a sync and a breaker transition belong to no request.
// BreakerState and BreakerStates report the breakers; an Observer counts
// their openings (core.EventBreaker with To "open").
//
// # Time
//
// Decisions, deny-cache and lease expiry use the now passed to Take (the
// Limiter's clock). The tier's own work — the breaker's cool-down and the
// sync rounds' now — uses WithClock. Tests drive both with a
// core.ManualClock and call [Store.Sync] by hand. The scheduler-latency
// probe reads the system's monotonic clock.
package fleet
