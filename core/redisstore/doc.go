// Package redisstore is a [core.Store] that keeps rate-limit state in Redis,
// so that a fleet of app servers shares one quota.
//
//	client, err := redisstore.NewClient("redis://redis:6379") // or rediss://, a Cluster's seeds, Sentinel
//	...
//	store, err := redisstore.New(client)
//	...
//	limiter, err := core.NewLimiter(store, core.Policy{
//		Name:   "api",
//		Limits: []core.Limit{core.Per(900, 15*time.Minute), core.PerMinute(200)},
//	})
//
// It accepts any go-redis v9 [redis.UniversalClient]: a single node,
// Sentinel (redis.NewFailoverClient), Cluster and Ring. [NewClient]
// builds one from a URL with the settings a limiter needs (it is the
// documented way; a client built by hand needs at least
// ContextTimeoutEnabled).
//
// # One atomic round trip
//
// Every decision is one Lua script run with EVALSHA (EVAL when Redis lost
// the script after a restart or SCRIPT FLUSH; [Store.Preload] loads them
// ahead). The script reads, decides and writes atomically, for every limit
// of a policy at once, so concurrent servers never over-admit and a
// multi-limit decision is all-or-nothing. The scripts port core's math
// exactly: the same sequence of (time, cost) gives the same decisions as
// core/memstore (see "Time" for the one caveat).
//
// Single-limit policies of every algorithm, and GCRA and fixed-window
// policies with several limits, run scripts written out for that shape:
// straight-line Lua with one GET (MGET for several keys), the decision,
// and one SET ... PX per key whose state changed (a fixed-window count
// that grows within the window it was written in is added to with INCRBY
// instead, which keeps the TTL the window's first write set). Other
// multi-limit policies run their algorithm's generic script, with the
// same keys and encodings. On
// the Redis server a decision therefore costs TIME, the read and the
// write: a few microseconds of CPU, most of it Redis looking up, creating,
// expiring and freeing keys. BenchmarkTake reports that cost
// (redis-µs/call, from INFO commandstats) next to a raw EVALSHA of a
// trivial script and of a script that only GETs and SETs the key.
//
// Elastic policies (core.Policy.Elastic) run their algorithm's generic
// script with an elastic mode (a single-limit GCRA or fixed window its own
// straight-line script, one GET and at most one write: within the limit
// about 6 redis-µs per call against 5 for the hard GCRA script, and 7
// against 3.3 for the fixed window's, which adds in place with INCRBY;
// BenchmarkElasticTake. The generic scripts take about twice the hard
// ones'): the nominal take also
// evaluates, on a denial, whether the ceiling would admit (the hint that
// makes the Limiter ask its capacity signal), and TakeElastic
// decides against the limits raised to the ceiling in one more script
// call on the same keys. Each take is one atomic round trip, so the ceiling holds
// exactly across servers. Their keys carry the ceiling in the digest (the
// ceiling sizes the state): changing it starts afresh, and hard policies'
// keys are unchanged.
//
// # Quota verbs
//
// The store implements storekit.VerbStore and storekit.ReserveStore: Peek,
// Charge, Credit (core.Limiter.Refund), Reserve (core.Limiter.Wait's
// call) and Reset are one script call each, on the decision's keys, at
// Redis's clock unless WithClientTime, ported from core's model
// (core/verbs_model.go) and compared with it step by step in the tests.
// Reset is one DEL; the sliding log's Peek returns its rings to Go, which
// decides with core's model, writing nothing. Preload and Check load
// these scripts too. BenchmarkVerbs reports their Redis CPU per call
// beside Take's (about twice a straight-line decision's for Charge,
// Refund and Reserve, which run the generic scripts).
//
// # Keys
//
// Each limit of a policy has one key:
//
//	prefix + "{" + tag + "}" + letter + index + digest     e.g. limitkit:{q3Rz0PxL_aQe}g0AbCd
//
// tag is 12 base64url characters (72 bits) of SHA-256(policy name, NUL,
// key): the raw key never reaches Redis, any key (braces, newlines, NUL,
// 64 KB) gives a fixed-length Redis key, and all keys of one decision share
// the hash tag, hence one Cluster slot, while different users spread over
// the cluster. letter is the algorithm (g, t, w, l, c), index the limit's
// position, digest 4 characters of a hash of the limit's parameters: a
// policy that keeps its name but changes a limit starts that limit afresh
// instead of misreading state written under other parameters. Policies are
// identified by name: two servers using the same name share quota.
//
// The prefix ([WithPrefix], default "limitkit:") must not contain braces.
//
// # State and memory
//
// With the default prefix a key is 29 bytes, and the values are:
//
//	GCRA             the theoretical arrival time, an integer string         72 B per key
//	FixedWindow      count × 2^33 + window index mod 2^33, an integer string  72 B
//	                 while the count is below 2^20, else "index:count"
//	TokenBucket      last refill × 1000 + (capacity − tokens), an integer     72 B
//	                 string while the deficit is below 1000, else "tokens:last"
//	SlidingWindowLog core's ring: an 8-byte head, then 8 bytes per slot
//	                 written so far (at most the capacity), a string;
//	                 searched by binary search, and above 256 slots read
//	                 (GETRANGE) and written (SETRANGE) slot by slot, so a
//	                 decision moves O(log C + cost) bytes, never the whole log
//	SlidingWindowCounter 8 bytes + (buckets+1) counts of 1, 2 or 4 bytes
//	                 (the smallest that holds the capacity), a string
//
// A calendar limit (core.PerCalendar) keeps the fixed window's value, its
// index the calendar period's; Go sends the periods around the caller's
// clock with each call and the script picks the one holding its own now
// (the server's TIME by default), so the two clocks may differ by up to a
// period before a call fails; its keys expire at the period's end. See
// docs/calendar.md.
//
// (bytes are Redis's MEMORY USAGE on Redis 7 with jemalloc; see the
// benchmarks for the log and counter figures).
//
// The work of one decision is bounded for every policy validation
// accepts: O(log C) for a sliding log decision plus the slots it writes
// (the cost, at most C = 100,000: 30–40 µs of Redis CPU for a decision on
// a full 100,000-slot log, about 0.2 ms when a counted cost rewrites all
// of it, about 2 ms the first time a fresh key's ring grows to 100,000
// slots, as Redis allocates its 800 KB and then rewrites it at its exact
// size), and O(buckets) for the sliding counter (at most 600 buckets, core's
// bound: about 0.06–0.1 ms). Both bounds hold for the sum over a policy's
// limits (8 limits × 75 buckets at most; the generic multi-limit script
// costs about twice the single-limit one per bucket). See
// BenchmarkWorstCase, which runs a single-limit GCRA (6–7 µs) alongside.
//
// # Time
//
// By default the script reads the Redis server's clock (TIME), so app
// servers with skewed clocks agree, and the now argument of Take is
// ignored. [WithClientTime] uses now instead (tests with a fake clock, or
// deployments that want the app server's clock). Do not mix the two on
// one policy: the TTL pads differ.
//
// A single-limit fixed window whose window is a whole number of
// milliseconds reads Redis's clock, on a key of the current window, from
// the key's TTL (which ends at the window's end plus the pad) instead of
// calling TIME, the dearest command of its script, except in the last
// second of a window (so a key a WithClientTime server wrote, whose pad
// is a second longer, is never taken for the next window's): the
// decision is the same, and ResetAfter and RetryAfter are rounded up to
// whole milliseconds, at most 2 ms more than the exact figure, never
// less (on a key a WithClientTime server wrote, up to a second more).
//
// Every key gets a TTL that ends when its state is back to full (core's
// ExpiresAt) plus 1 ms (rounding to Redis's milliseconds), plus 1 s under
// WithClientTime (Redis expires keys on its own clock). That is at most the window for the fixed window and
// the log, the window plus one bucket for the sliding counter, and
// Burst/Requests × window for GCRA and the token bucket. A key found
// without a TTL (e.g. after PERSIST) gets one back on the next decision
// (a single-limit fixed window adds to its count in place without reading
// the TTL: there, on the next decision that rewrites the key, at the
// latest the first of a later window). A
// state that is back to full is deleted rather than written, so a request
// stamped earlier than that instant (a clock gone back past it) sees a
// fresh key; while the state lives, a clock gone back is handled as core
// handles it (the state is normalized so no wait exceeds the policy's;
// see core.Compiled.Decide). Under WithClientTime, app servers whose
// clocks differ by D and serve the same key alternately can let up to D
// of refill through at each switch: keep their clocks in sync, or use the
// default Redis TIME.
//
// # Deadlines and failures
//
// The store does not arm its own timer: the context passed to Take bounds
// the call, and [core.Limiter] gives each call a deadline (50 ms by
// default), as a time to TakeBy, which bounds the call's context by it; under
// [WithPipelining] a queued decision's deadline is kept by its node's
// queue instead (see there).
// go-redis applies a context deadline to socket reads and writes only when
// the client's ContextTimeoutEnabled option is set; [New] refuses a
// *redis.Client, *redis.ClusterClient or *redis.Ring without it, so a
// frozen or unreachable Redis cannot hold a request past the deadline (the
// tests check this with a SIGSTOPped and a killed redis-server). A failed
// or timed-out call returns an error ("redisstore: ...", wrapping the
// cause, context.DeadlineExceeded on a timeout); the Limiter then applies
// the policy's fail mode. Nothing panics: a reply of an unexpected shape is
// an error. A Redis error reply comes back as a *[ReplyError], whose kind
// (tryagain, clusterdown, redirect, readonly, loading, oom, script, other)
// core.ClassifyError, the metrics and the logs report.
//
// A decision is never retried by go-redis, whatever the client's
// MaxRetries: a connection that broke after the request was written may
// have run the script, and a retry would charge the decision twice. The
// store itself retries only replies that say the script did not run:
// NOSCRIPT (with EVAL), and TRYAGAIN (a two-key decision whose keys a
// Cluster slot migration has split; sent again every 5 ms within the
// deadline, until the keys are on one side). TakeBatch's pipeline is not
// retried (NOSCRIPT entries excepted).
//
// # Failover
//
// On a Cluster, an error that says the client's slot map may be stale (a
// refused or broken connection, a timeout, CLUSTERDOWN, MOVED or ASK past
// the client's redirect limit, READONLY) makes the store ask go-redis to
// reload the map (ClusterClient.ReloadState, at most every 100 ms; go-redis
// reloads at most every 200 ms): a dead master never answers MOVED, and
// go-redis alone would keep sending its keys to the dead address until its
// periodic reload (ClusterStateReloadInterval, 60 s by default). With it,
// the victim's keys decide again within about 0.2 s of a replica's
// promotion after kill -9 of the master, 0.8 s after a SIGSTOP
// (TestRecoveryFollowsFailover, a 3+3 cluster, asserts at most 3 s).
//
// Limits are only as durable as Redis's writes: see [Store.Check], which
// warns when persistence is off, and the Durability section of docs/redis.md.
//
// # Pipelining
//
// [WithPipelining] sends concurrent decisions bound for one node in shared
// pipelines: still one script per decision, exact, and never sent twice,
// at up to the rate Redis's CPU allows instead of the round trips'
// (docs/redis-pipelining.md has the figures and the trade-offs).
//
// The caller owns the client (and closes it); a Store starts no goroutines
// (with WithPipelining, a few per node while decisions flow; see there).
package redisstore
