// Package metrics exports what limitkit decides and how its stores behave
// as Prometheus metrics. It is its own package so that a program that does
// not use Prometheus never links client_golang: core only defines the
// [core.Observer] interface that [Metrics] implements.
//
//	m := metrics.MustNew()
//	prometheus.MustRegister(m)
//	lim, err := core.NewLimiter(store, policy, core.WithObserver(m))
//	m.WatchMemstore("default", store) // when store is a memstore.Store
//	m.WatchPolicy(*lim.Policy())       // the configured-limit gauge
//	m.WatchFleet()                     // when store is a fleet tier: its series at zero
//	http.Handle("GET /metrics", promhttp.Handler())
//
// # Metrics
//
// With the default namespace "limitkit":
//
//	limitkit_decisions_total{policy,outcome}      counter   outcome: allowed, denied, shadowed, elastic, degraded
//	limitkit_store_errors_total{policy,kind}      counter   kind: timeout, connection, circuit_open, canceled, other;
//	                                                          reply kinds as they occur: tryagain, clusterdown, redirect, readonly, loading, oom, script
//	limitkit_store_latency_seconds{policy}        histogram the store call of a decision (stores that do I/O)
//	limitkit_deny_cache_hits_total{policy}        counter   fleet tier: denied locally from the deny cache
//	limitkit_fallbacks_total{policy}              counter   fleet tier: decided locally, remote store failed
//	limitkit_breaker_state{policy}                gauge     fleet tier: 0 closed, 1 open, 2 half-open
//	limitkit_breaker_transitions_total{policy,to} counter   fleet tier: breaker changes, by state entered
//	limitkit_in_flight{policy}                    gauge     in-flight slots this process holds (core.Concurrency)
//	limitkit_syncs_total{result}                  counter   fleet tier: sync round trips, ok or error
//	limitkit_sync_errors_total{kind}              counter   fleet tier: failed syncs by kind
//	limitkit_sync_keys_total                      counter   fleet tier: entries synced
//	limitkit_sync_latency_seconds                 histogram fleet tier: sync round trips
//	limitkit_memstore_keys{store}                 gauge     embedded store: keys held (WatchMemstore)
//	limitkit_memstore_evictions_total{store}      counter   embedded store: live keys evicted at the key cap
//	limitkit_limit_requests{policy,limit,window}  gauge     configured limits (WatchPolicy): Limits[limit].Requests per window seconds
//	limitkit_limit_source_total{policy,result}    counter   limit source (core.Sourced): hit, found, not_found, error, timeout, fallback
//
// A degraded decision is one where the store failed and the policy's fail
// mode decided (admitted under open, denied under closed): alert on
// rate(limitkit_decisions_total{outcome="degraded"}[5m]) > 0. The
// decisions and errors series of a policy exist from its first decision
// (at zero), so such an alert sees them before the first failure.
// A peek (core.Limiter.AllowN with cost 0, a core.EventVerb "peek") is
// not a decision and is not counted, not even its store error; nor are
// Charge, Refund and Reset (core.EventVerb "charge", "refund", "reset"). A store error after the caller gave up (core.ErrCallerDone)
// has kind canceled: the caller's, not the store's.
//
// # Cardinality
//
// Labels are policy names (configuration), kinds and outcomes, never keys:
// no event carries a client key. The number of policy label values is
// capped ([WithMaxPolicies], default 100); events of later policies are
// counted under policy="other". Events that span policies carry an empty
// policy: a sync has no policy label; a tier's breaker (one per Redis
// master, serving every policy) is exported under every known policy,
// 1 while any of them is open, else 2 while any is half-open, else 0
// (never policy=""). Two tiers observed by one registry need a Metrics
// each with [WithConstLabels] to tell them apart.
//
// # Cost
//
// Observe does not allocate once a policy has been seen and costs a few
// atomic adds: the package's BenchmarkDecision compares a limiter over the
// embedded store with and without a Metrics.
package metrics
