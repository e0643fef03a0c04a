// Package storekit is what a store author needs beyond [core.Store]: the
// optional interfaces a store may add, and the policy-name bookkeeping
// ([PolicyRegistry]) a store that keys its state by policy name keeps.
// Applications do not need it: they build a store (core/memstore,
// core/redisstore, core/fleet) and hand it to [core.NewLimiter].
//
// A [core.Limiter] finds the optional interfaces by type assertion on its
// store, so a store written anywhere gets their behaviour by having the
// methods; the interfaces here name the method sets, for documentation
// and for compile-time assertions (var _ storekit.VerbStore =
// (*Store)(nil)). The interfaces core looks for are [LocalStore] (a
// store without I/O: the Limiter calls its Take directly, with no
// deadline, its fast path), [FallbackStore] (a tier that decides
// FailLocal itself), [VerbStore] (Peek, Reset, Charge, Refund),
// [ReserveStore] (Wait in one call per admission), [ElasticStore]
// (elastic policies), [Refunder] (a [core.CapacityLimit]'s release),
// [PolicyRegistrar] (names registered at [core.NewLimiter]) and
// [SlotStore] (in-flight limits, [core.Concurrency]). [BatchStore] and
// [DomainStore] are what the fleet tier (core/fleet) looks for on its
// remote store.
//
// The algorithms' math is core's: [core.Policy.Compile] turns a policy
// into a [core.Compiled] whose methods apply a request to a key's state.
// Package core/storetest is the conformance suite every limitkit store
// passes; a store written elsewhere runs it with storetest.Run.
package storekit
