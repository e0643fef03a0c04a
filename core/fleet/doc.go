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
// DefaultWriteBackSync); a policy's own Sync sets how long its leases
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
// # Circuit breaker with local fallback
//
// After WithBreaker's threshold of consecutive remote failures (errors or
// timeouts of takes and of sync rounds; a request its caller cancelled
// does not count) the breaker opens: for the cool-down no request calls
// the remote store, so none waits for the store deadline. Then, if the
// remote store has a Ping method (the Redis store does: PING to every
// shard), a background goroutine pings it every probe interval and
// closes the breaker on the first success; otherwise the first request
// after the cool-down is let through as the half-open probe, and its
// outcome closes or reopens the breaker. Only the requests in flight when
// the remote store hung, or sent before the threshold was reached, pay the
// deadline.
//
// While the breaker is open, and for a request whose remote call failed:
// a policy with core.FailLocal is decided by an embedded store
// (core/memstore, one per tier) with each limit's Requests and Burst
// divided by the fleet size (the policy's FleetSize, else WithFleetSize;
// rounded down, at least 1), returned Degraded with an error wrapping the
// cause (core.ErrCircuitOpen while open); a FailOpen or FailClosed policy
// gets a zero decision and that error at once, and the Limiter applies
// the fail mode. Counts made during the outage stay in the embedded store
// for their window and are never merged into the remote store (which
// therefore holds, after recovery, exactly what it held before the
// outage). Leased units keep being spent while the remote store is down
// (they were charged already); cached denials keep being served; pending
// CountDenied counts wait for the breaker to close.
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
// # Events
//
// WithObserver receives core.EventDenyCacheHit (per cached denial, with
// the decision), core.EventSync (per sync round trip: Keys entries,
// Latency, Err), core.EventBreaker (every transition, From → To) and
// core.EventFallback (per FailLocal decision). No event carries a key.
//
// # Time
//
// Decisions, deny-cache and lease expiry use the now passed to Take (the
// Limiter's clock). The tier's own work — the breaker's cool-down and the
// sync rounds' now — uses WithClock. Tests drive both with a
// core.ManualClock and call [Store.Sync] and [Store.Probe] by hand.
package fleet
