package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store holds per-key state and applies decisions to it atomically.
//
// Take applies cost to key under p at now and returns the decision: one
// atomic check-and-consume, so concurrent calls for one key never
// over-admit. A denial is a Decision with Allowed false, never an error; an
// error means the store itself failed (the Limiter then applies the
// policy's FailMode). key is opaque; stores must not assume it is printable
// or short, and must not keep it in a form an attacker can grow without
// bound.
//
// A store may take time from its own clock instead of now (the Redis store
// uses the Redis server's clock by default); such a store documents it.
//
// Implementations must be safe for concurrent use.
type Store interface {
	Take(ctx context.Context, key string, p *Policy, now time.Time, cost int64) (Decision, error)
}

// localStore is a store that does no I/O (the in-memory store;
// storekit.LocalStore documents it): a Limiter then calls Take without
// arming a per-call deadline, which would cost more than the decision.
type localStore interface {
	Store
	Local() bool
}

// deadlineStore is a [Store] that bounds its calls by a deadline it is
// given as a time (the Redis store and the fleet tier): a [Limiter] then calls
// TakeBy with its per-call deadline (now plus [WithTimeout]'s duration)
// instead of Take with a context.WithTimeout per decision, whose timer
// and allocations cost more than a batched remote decision (the Redis
// store with pipelining enforces the deadlines of its queued calls
// itself).
type deadlineStore interface {
	Store
	// TakeBy is Take bounded by deadline as well as by ctx: it returns by
	// deadline, or by ctx's own deadline if that is earlier, or when ctx
	// is done, whichever comes first; past deadline, with an error that
	// wraps context.DeadlineExceeded, as Take's when ctx's deadline
	// passes. A zero deadline is none. Safe for concurrent use.
	TakeBy(ctx context.Context, deadline time.Time, key string, p *Policy, now time.Time, cost int64) (Decision, error)
}

// fallbackStore is a store in front of a remote store that decides
// FailLocal by itself (the fleet tier; storekit.FallbackStore documents
// it): it returns a Degraded decision together with the error, and the
// Limiter keeps that decision instead of applying a fail mode.
type fallbackStore interface {
	Store
	FallsBackLocally() bool
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("limitkit: store closed")

// ErrInvalidCost is returned for a negative cost.
var ErrInvalidCost = errors.New("limitkit: cost must be >= 0")

// StoreError is the error a [Limiter] returns when its store failed or timed
// out; the accompanying Decision has the policy's FailMode applied and
// Degraded set. Unwrap gives the store's error (context.DeadlineExceeded on
// a timeout); [ClassifyError] names its kind ("timeout" for a deadline).
type StoreError struct {
	// Policy is the name of the policy being decided.
	Policy string
	// Mode is the fail mode that was applied.
	Mode FailMode
	// Err is the store's error.
	Err error
}

// Error implements error. It contains the store's error text, which may
// name hosts: log it, do not send it to clients.
func (e *StoreError) Error() string {
	return fmt.Sprintf("limitkit: store failed for policy %q (failing %s): %v", e.Policy, e.Mode, e.Err)
}

// Unwrap returns the store's error.
func (e *StoreError) Unwrap() error { return e.Err }
