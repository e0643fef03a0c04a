// Package memstore is limitkit's embedded store: per-key rate-limit state in
// process memory, for a single server or as the default before Redis.
//
// It is a sharded open-addressing hash table per policy (256 shards, one
// lock each, no global lock), holding a seeded 64-bit hash of each key and
// the algorithm's state words: 16 bytes a slot for GCRA and the fixed
// window, 24 for the token bucket. A decision for an existing key allocates
// nothing. The key count is capped per policy ([WithMaxKeys]); at the cap a
// new key evicts an expired key, else the one expiring soonest, so every
// request is tracked. A background sweeper drops expired keys one shard at a
// time; [Store.Close] stops it.
//
//	store := memstore.MustNew()
//	defer store.Close()
//	limiter := core.MustNewLimiter(store, core.Policy{Name: "api", Limits: []core.Limit{core.PerMinute(100)}})
package memstore
