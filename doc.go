// Package limitkit is the map of limitkit, rate limiting for Go web
// services. This package holds no code: import the packages below.
//
// One framework-agnostic core decides allow or deny; thin adapters pull
// the key out of a request and answer a denial with 429 Too Many Requests
// and the rate-limit headers; stores keep the state in process or in
// Redis. Dependencies point one way: adapters → the middleware engine →
// keyfuncs and core ← stores (keyfuncs does not import core; see
// ARCHITECTURE.md for every import).
//
// # What users import
//
//   - github.com/limitkit/limitkit/core: Limit, Policy, Limiter, Decision
//     and the quota verbs (Allow, Peek, Reset, Charge, Refund, Wait); the
//     algorithms' math, fail modes, clocks and the observer interface.
//   - github.com/limitkit/limitkit/core/memstore: the embedded store
//     (sharded, bounded, no allocation per decision).
//   - github.com/limitkit/limitkit/core/redisstore: the Redis store (node,
//     Sentinel, Ring, Cluster), one atomic script per decision.
//   - github.com/limitkit/limitkit/core/fleet: a local tier in front of a
//     remote store (deny cache, write-back leases, circuit breakers).
//   - github.com/limitkit/limitkit/core/storetest: the conformance suite
//     a store passes, for store authors.
//   - github.com/limitkit/limitkit/keyfuncs: who a limit applies to: peer
//     IP, trusted proxies, headers, API keys, verified JWT claims, and
//     their combinations.
//   - github.com/limitkit/limitkit/nethttp, ginlimit, echolimit, fiberlimit
//     and grpclimit: the framework adapters.
//   - github.com/limitkit/limitkit/httplimit: the options every adapter
//     takes, and the middleware engine adapters (yours too) are built on.
//   - github.com/limitkit/limitkit/rules: limits as data (YAML or JSON
//     files), reloaded atomically.
//   - github.com/limitkit/limitkit/rules/serve: a rules file served through
//     any adapter: a middleware per rule, a dispatcher, reloads.
//   - github.com/limitkit/limitkit/metrics and otellimit: Prometheus and
//     OpenTelemetry observers.
//   - github.com/limitkit/limitkit/rls: Envoy's rate limit service over
//     limitkit's stores, reading envoyproxy/ratelimit's configuration;
//     cmd/limitkit-rls serves it.
//
// # Where to read next
//
// README.md is the front page (install, a quick start per framework);
// the docs/ directory holds the guides (algorithms, keys, Redis and
// durability, fleet mode, operations, rules, recipes, benchmarks);
// ARCHITECTURE.md follows one request through the packages and says how
// to add an option, an algorithm, a store or an adapter.
package limitkit
