package storekit

import (
	"context"
	"time"

	"github.com/limitkit/limitkit/core"
)

// LocalStore is implemented by stores that do no I/O (the in-memory
// store): a [core.Limiter] then calls Take without arming a per-call
// deadline, which would cost more than the decision.
type LocalStore interface {
	core.Store
	// Local reports whether Take never blocks on I/O.
	Local() bool
}

// FallbackStore is a [core.Store] in front of a remote store that can
// decide by itself when the remote store fails: for a policy with
// [core.FailLocal] it returns a Degraded decision together with the
// error, and the [core.Limiter] keeps that decision instead of applying a
// fail mode. The fleet tier is one; [core.NewLimiter] refuses FailLocal
// on a remote store that is not.
type FallbackStore interface {
	core.Store
	// FallsBackLocally reports whether the store applies FailLocal itself.
	FallsBackLocally() bool
}

// VerbStore is a [core.Store] that implements the quota verbs beyond
// Take, each atomic on the key's state and, on a remote store, one round
// trip. The embedded, Redis and fleet stores implement it; a
// [core.Limiter] on a store that does not returns [core.ErrUnsupported]
// from Peek, Reset, Charge and Refund.
//
// Credit is the store side of [core.Limiter.Refund] (named apart from
// [Refunder]'s Refund, which a CapacityLimit uses and reports no
// decision).
//
// Peek returns the Decision Take would return for cost at now, consuming
// nothing and writing nothing (see [core.Compiled.PeekTo]). Reset forgets
// the key's state under p on every limit, as if never seen. Charge
// consumes cost even beyond the limit and Credit returns up to cost, each
// returning the key's state afterwards (see [core.Compiled.ChargeTo],
// [core.Compiled.RefundTo] and the per-algorithm bounds in their docs).
// cost is >= 0. A store with its own clock ignores now, as for Take.
// Implementations must be safe for concurrent use.
type VerbStore interface {
	core.Store
	Peek(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
	Reset(ctx context.Context, key string, p *core.Policy) error
	Charge(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
	Credit(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
}

// ReserveStore is a [core.Store] that can reserve a later admission in
// one atomic step ([core.Compiled.ReserveTo]): Reserve admits the request
// now, or for GCRA and the token bucket reserves its turn when it comes
// within maxWait (Allowed with RetryAfter > 0: the caller proceeds once
// RetryAfter has passed, without another call), or denies it as Take
// does. [core.Limiter.WaitN] uses it so that a waiter costs one store
// call per admission; without it, WaitN sleeps and retries.
type ReserveStore interface {
	core.Store
	Reserve(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64, maxWait time.Duration) (core.Decision, error)
}

// ElasticStore is a [core.Store] that can decide elastic policies: Take
// decides against the nominal limits and sets [core.Decision].ElasticRoom
// on a denial the ceiling would admit; TakeElastic applies cost to key
// against the limits raised to the policy's ceiling, in one atomic step
// on the same state, and sets [core.Decision].Elastic when the admission
// went above a nominal limit ([core.Compiled.DecideElasticTo] is the
// math). A denied TakeElastic consumes nothing. The embedded, Redis and
// fleet stores implement it; [core.NewLimiter] rejects an elastic policy
// on a store that does not.
type ElasticStore interface {
	core.Store
	TakeElastic(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) (core.Decision, error)
}

// Refunder is a [core.Store] that can give back what a Take admitted:
// Refund returns cost to key under p at now, as if the Take of cost that
// admitted it had not happened, for a policy that
// [core.Policy.Refundable] says can be refunded (an error otherwise;
// [core.Compiled.Refund] is the math). Nothing is returned to a key with
// no state. It is what lets a [core.CapacityLimit] release capacity; the
// embedded, Redis and fleet (exact mode) stores implement it.
type Refunder interface {
	core.Store
	Refund(ctx context.Context, key string, p *core.Policy, now time.Time, cost int64) error
}

// SlotStore is the optional store interface of concurrency limits: a
// [core.Store] that implements it can back a [core.Concurrency]
// (memstore, redisstore, and the fleet tier when its remote store does).
// A store without it is an error in [core.NewConcurrency].
//
// A key's state is a set of holder tokens, each with an expiry (its
// lease). Both calls are atomic; implementations must be safe for
// concurrent use and return an error only when the store itself failed.
type SlotStore interface {
	core.Store
	// AcquireSlot drops key's expired holders (expiry <= now) under p,
	// then: if token holds a slot already, moves its expiry to now +
	// p.Lease (a renewal; ok true whatever the count); else, if fewer
	// than p.Max hold one, adds token with that expiry (ok true); else
	// changes nothing (ok false). held is the number of holders after the
	// call. A remote store may read now from its own clock (redisstore
	// reads Redis TIME by default). p.Lease is never 0 here.
	AcquireSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64, now time.Time) (held int64, ok bool, err error)
	// ReleaseSlot removes token from key's holders under p (nothing if it
	// holds no slot).
	ReleaseSlot(ctx context.Context, key string, p *core.ConcurrencyPolicy, token uint64) error
}

// DomainStore is a [core.Store] whose keys live in separate failure
// domains, each of which can fail alone (the masters of a Redis Cluster).
// The fleet tier keeps a circuit breaker per domain of its remote store,
// so that one dead master affects only its own keys.
type DomainStore interface {
	core.Store
	// Domain names the failure domain holding key's state under p (for a
	// Cluster, the address of the master serving the key's slot), from
	// state the store holds already: it does no I/O. "" means the store
	// is one domain, or the domain is not known yet. Safe for concurrent
	// use.
	Domain(key string, p *core.Policy) string
}

// BatchTake is one entry of a [BatchStore.TakeBatch]: the arguments of a
// Take (Key, Policy, Now, Cost) and, written in place by TakeBatch, its
// result (Decision, Err).
type BatchTake struct {
	Key    string
	Policy *core.Policy
	Now    time.Time
	Cost   int64
	// Decision and Err are the entry's outcome, as Take would return them.
	Decision core.Decision
	Err      error
}

// BatchStore is a [core.Store] that can apply many takes in one round
// trip (the Redis store sends one pipeline per node). The fleet tier uses
// it on its remote store to sync many keys at once.
//
// TakeBatch applies every entry of batch, each exactly as Take would
// (atomic per entry, in order per key), and writes each entry's Decision
// and Err in place. It is all-or-nothing per entry, not across entries:
// some entries may succeed while others fail. The returned error is
// non-nil when the batch as a whole could not be sent (then every entry's
// Err is set too); entries may still have individual errors when it is
// nil. Implementations must be safe for concurrent use.
type BatchStore interface {
	core.Store
	TakeBatch(ctx context.Context, batch []BatchTake) error
}
