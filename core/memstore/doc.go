// Package memstore is limitkit's embedded store: per-key rate-limit state in
// process memory, for a single server or as the default before Redis.
//
// It is a sharded open-addressing hash table per policy (up to 256 shards,
// one lock each, no global lock), holding a seeded 64-bit hash of each key
// and the algorithm's state words: 16 bytes a slot for GCRA and the fixed
// window, 24 for the token bucket. A decision for an existing key allocates
// nothing.
//
// Memory is bounded per policy: by a key cap ([WithMaxKeys]) and a memory
// budget ([WithMaxStateBytes], 512 MiB by default) that covers the slots,
// the state and the buffers. At the cap a new key evicts an expired key if
// there is one, else the candidate with the most quota left, so a flood of
// new keys evicts its own keys, not a key that has spent its quota (say, a
// username under attack on a login limit), which would start afresh; see
// [Store] for the exact rule and its limits. A background sweeper drops
// expired keys one shard at a time; [Store.Close] stops it.
//
// Policies are matched by name: Limiters built from equal policies share
// state, so building one per request still limits (building one at start-up
// and sharing it is cheaper). A store holds at most 1024
// policy names ([WithMaxPolicies]).
//
// Elastic policies (core.Policy.Elastic) are decided under the key's lock
// in both takes (Take with its ceiling hint, TakeElastic),
// so their ceilings hold exactly; their state is sized for the ceiling.
//
//	store := memstore.MustNew()
//	defer store.Close()
//	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
package memstore
