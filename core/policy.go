package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Algorithm selects how a [Policy] counts. The zero value is [GCRA].
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm: one timestamp per limit per
	// key (the theoretical arrival time), exact, the smallest state. It is
	// equivalent to a token bucket of capacity Burst refilled at
	// Requests/Window. The default.
	GCRA Algorithm = iota
	// TokenBucket keeps a token count and the last refill instant; tokens
	// are added one whole token at a time at Requests/Window, up to Burst.
	TokenBucket
	// FixedWindow counts cost in windows aligned to the Unix epoch (a 1m
	// window runs from :00 to :60). Cheapest, but a client can spend up to
	// twice the limit across a window boundary.
	FixedWindow
	// SlidingWindowLog keeps one timestamp per admitted unit of cost and
	// admits when the cost in the last Window is within the limit: exact,
	// and the most memory (8 bytes per unit of the limit per key).
	SlidingWindowLog
	// SlidingWindowCounter divides each window into [Policy.Buckets]
	// sub-windows and estimates the cost in the last Window as the complete
	// buckets inside it plus the oldest bucket weighted by its overlap
	// (one bucket is the two-window estimate previous × overlap + current).
	SlidingWindowCounter
	numAlgorithms
)

var algorithmNames = [...]string{
	GCRA:                 "gcra",
	TokenBucket:          "token_bucket",
	FixedWindow:          "fixed_window",
	SlidingWindowLog:     "sliding_log",
	SlidingWindowCounter: "sliding_counter",
}

// String returns the algorithm's configuration name: "gcra",
// "token_bucket", "fixed_window", "sliding_log" or "sliding_counter".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// parseAlgorithm parses an algorithm name as returned by String (case and
// '-' versus '_' do not matter).
func parseAlgorithm(s string) (Algorithm, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
	for a, name := range algorithmNames {
		if n == name {
			return Algorithm(a), nil
		}
	}
	return 0, fmt.Errorf("core: unknown algorithm %q (want one of %s)", s, strings.Join(algorithmNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if a >= numAlgorithms {
		return nil, fmt.Errorf("core: invalid algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := parseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// FailMode says what a [Limiter] decides when its store fails or times out.
// The zero value is [FailOpen].
type FailMode uint8

const (
	// FailOpen admits the request and marks the decision Degraded: a dead
	// store never takes the API down, at the price of not limiting while it
	// is dead. The default.
	FailOpen FailMode = iota
	// FailClosed denies the request and marks the decision Degraded;
	// adapters answer 503 Service Unavailable (not 429: the client did
	// nothing wrong). Use it where over-admission is worse than an outage
	// (login, payments).
	FailClosed
	// FailLocal decides from a local embedded store with each limit divided
	// by a configured fleet size (so a fleet of that many servers admits
	// about the limit in total), marking the decision Degraded. It needs a
	// store that falls back locally (a storekit.FallbackStore, such as the fleet
	// tier in front of Redis); [NewLimiter] rejects it for any other remote
	// store. On an embedded store, which never fails, it never applies.
	FailLocal
)

// String returns "open", "closed" or "local".
func (m FailMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// parseFailMode parses "open", "closed" or "local" ("" is open).
func parseFailMode(s string) (FailMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "open", "":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	case "local":
		return FailLocal, nil
	}
	return 0, fmt.Errorf("core: unknown fail mode %q (want open, closed or local)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m FailMode) MarshalText() ([]byte, error) {
	if m > FailLocal {
		return nil, fmt.Errorf("core: invalid fail mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *FailMode) UnmarshalText(b []byte) error {
	v, err := parseFailMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// maxBuckets bounds [Policy.Buckets] for the sliding window counter. A
// decision reads every bucket of the window (on Redis, about 0.1 µs of
// server CPU per bucket), so the bound is what keeps one decision cheap;
// 600 buckets already put the estimate within 1/600 of the window.
const maxBuckets = 600

// maxLogRequests bounds Requests for the sliding log, whose state holds one
// timestamp per unit of the limit; it bounds the sum over a policy's
// limits too (soft and elastic overage included), as maxBuckets does.
const maxLogRequests = 100_000

// Policy is a named set of limits that must all hold, with the algorithm
// that counts them and the behaviour switches.
//
// A decision over a policy with several limits (900 per 15m AND 200 per 1m)
// is all-or-nothing: when any limit denies, no limit is consumed.
//
// The zero value is invalid (it has no limits). Call [Policy.Validate], or
// let [NewLimiter] do it, before use. A Policy must not be modified after it
// has been handed to a Limiter or a Store: stores key their state by the
// *Policy pointer and its name.
type Policy struct {
	// Name identifies the policy in decisions, headers (RateLimit-Policy)
	// and store keys. Required; at most 64 bytes of [A-Za-z0-9_.:/-].
	Name string `json:"name" yaml:"name"`
	// Algorithm counts the limits. Default GCRA.
	Algorithm Algorithm `json:"algorithm" yaml:"algorithm"`
	// Limits must all hold. At least one, at most 8.
	Limits []Limit `json:"limits" yaml:"limits"`
	// Buckets is the number of sub-windows of the sliding window counter
	// (1 = the two-window weighted estimate; 60 for an hourly limit = one
	// counter a minute). 0 means 1; at most 600 across the limits
	// (limits × buckets ≤ 600: every decision reads every bucket of every
	// limit). Must divide every limit's window into whole microseconds.
	// Other algorithms require 0.
	Buckets int `json:"buckets,omitempty" yaml:"buckets,omitempty"`
	// CountDenied makes denied requests consume quota too (capped at an
	// empty bucket / a full window), so a client that keeps hammering
	// stays locked out until it is quiet for the refill time. Default false:
	// denied requests consume nothing.
	CountDenied bool `json:"count_denied,omitempty" yaml:"count_denied,omitempty"`
	// SoftPercent tolerates this percentage over every limit: 10 admits
	// 110 of a 100 limit. Decisions still report the nominal Limit, and
	// Remaining counts down to 0 at the nominal limit. 0..1000.
	SoftPercent int `json:"soft_percent,omitempty" yaml:"soft_percent,omitempty"`
	// Shadow never denies: a request the policy would deny is admitted with
	// Decision.Shadowed set, and consumes what a denied one would (nothing
	// unless CountDenied). For rolling out a new limit safely.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
	// Elastic, when set, lets a request the limits deny be admitted up to
	// a ceiling above every limit while a capacity signal says the service
	// has room; see [Elastic]. nil (the default) is hard throttling. Not
	// with SoftPercent, CountDenied or Shadow.
	Elastic *Elastic `json:"elastic,omitempty" yaml:"elastic,omitempty"`
	// FailMode is what a Limiter decides when the store fails. Default open.
	FailMode FailMode `json:"fail_mode,omitempty" yaml:"fail_mode,omitempty"`
	// Mode chooses, for a store tier in front of a remote store (the fleet
	// tier), between deciding every request at the remote store (exact) and
	// deciding hot keys locally with periodic sync (write-back). The zero
	// value, ModeDefault, takes the tier's configured default. Stores
	// without a tier ignore it.
	Mode Mode `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Sync is the write-back sync interval for this policy; 0 takes the
	// tier's default. Only with Mode write-back (or ModeDefault). At most
	// one hour: Validate refuses a longer one.
	Sync time.Duration `json:"sync,omitempty" yaml:"sync,omitempty"`
	// FleetSize is the number of servers sharing the remote store: under
	// FailLocal each limit is divided by it while the remote store is
	// unreachable. 0 takes the tier's configured default. At most
	// 100,000: Validate refuses more.
	FleetSize int `json:"fleet_size,omitempty" yaml:"fleet_size,omitempty"`
}

// maxSync bounds Policy.Sync.
const maxSync = time.Hour

// maxFleetSize bounds Policy.FleetSize.
const maxFleetSize = 100_000

// Mode selects how a store tier decides a policy. The zero value is
// [ModeDefault].
type Mode uint8

const (
	// ModeDefault takes the tier's configured default mode.
	ModeDefault Mode = iota
	// ModeExact decides every request at the remote store (with the exact
	// deny cache in front of it).
	ModeExact
	// ModeWriteBack decides hot keys locally from quota leased from the
	// remote store and syncs at an interval; see the fleet tier for the
	// error bound.
	ModeWriteBack
	numModes
)

// String returns "", "exact" or "write-back".
func (m Mode) String() string {
	switch m {
	case ModeDefault:
		return ""
	case ModeExact:
		return "exact"
	case ModeWriteBack:
		return "write-back"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// parseMode parses "exact" or "write-back" ("writeback", "write_back" and
// case do not matter; "" is ModeDefault).
func parseMode(s string) (Mode, error) {
	switch strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-"), "writeback", "write-back") {
	case "":
		return ModeDefault, nil
	case "exact":
		return ModeExact, nil
	case "write-back":
		return ModeWriteBack, nil
	}
	return 0, fmt.Errorf("core: unknown mode %q (want exact or write-back)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if m >= numModes {
		return nil, fmt.Errorf("core: invalid mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := parseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Validate reports the first configuration mistake in p, or nil. The error
// says which field and what to fix.
func (p *Policy) Validate() error {
	if p == nil {
		return errors.New("core: nil policy")
	}
	if err := p.validateName(); err != nil {
		return err
	}
	if err := p.validateLimits(); err != nil {
		return err
	}
	if err := p.validateSwitches(); err != nil {
		return err
	}
	if err := p.validateElastic(); err != nil {
		return err
	}
	if err := p.validateCalendar(); err != nil {
		return err
	}
	for i, l := range p.Limits {
		if effective(l.capacity(), p.SoftPercent) > maxRequests {
			return fmt.Errorf("core: policy %q: limits[%d]: limit with soft overage exceeds %d", p.Name, i, maxRequests)
		}
	}
	return p.validateWork()
}

// validateName checks that p's name is 1 to 64 of the bytes
// [A-Za-z0-9_.:/-].
func (p *Policy) validateName() error {
	if p.Name == "" {
		return errors.New("core: policy name is empty; give every policy a name")
	}
	if len(p.Name) > 64 {
		return fmt.Errorf("core: policy %q: name longer than 64 bytes", p.Name[:64])
	}
	for i := 0; i < len(p.Name); i++ {
		c := p.Name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/-", c) >= 0) {
			return fmt.Errorf("core: policy %q: name byte %q not allowed (use [A-Za-z0-9_.:/-])", p.Name, c)
		}
	}
	return nil
}

// validateLimits checks p's algorithm, its limits under it, and the
// sliding counter's buckets.
func (p *Policy) validateLimits() error {
	if p.Algorithm >= numAlgorithms {
		return fmt.Errorf("core: policy %q: unknown algorithm %d", p.Name, p.Algorithm)
	}
	if len(p.Limits) == 0 {
		return fmt.Errorf("core: policy %q: no limits; add at least one (e.g. core.PerMinute(100))", p.Name)
	}
	if len(p.Limits) > maxLimits {
		return fmt.Errorf("core: policy %q: %d limits, at most %d (a decision checks every limit); drop the limits that never bind or split the policy", p.Name, len(p.Limits), maxLimits)
	}
	for i, l := range p.Limits {
		if err := l.validate(p.Algorithm); err != nil {
			return fmt.Errorf("core: policy %q: limits[%d]: %w", p.Name, i, err)
		}
	}
	switch {
	case p.Algorithm == SlidingWindowCounter:
		if p.Buckets < 0 || p.Buckets > maxBuckets {
			return fmt.Errorf("core: policy %q: buckets must be in [0, %d], got %d (every decision reads every bucket; use fewer, longer buckets)", p.Name, maxBuckets, p.Buckets)
		}
		for i, l := range p.Limits {
			if l.Window.Microseconds()%int64(p.buckets()) != 0 || l.Window%time.Microsecond != 0 {
				return fmt.Errorf("core: policy %q: limits[%d]: window %v does not divide into %d buckets of whole microseconds", p.Name, i, l.Window, p.buckets())
			}
		}
	case p.Buckets != 0:
		return fmt.Errorf("core: policy %q: buckets applies to sliding_counter only; remove it", p.Name)
	}
	return nil
}

// validateSwitches checks p's soft percent, fail mode, mode, sync and
// fleet size.
func (p *Policy) validateSwitches() error {
	if p.SoftPercent < 0 || p.SoftPercent > 1000 {
		return fmt.Errorf("core: policy %q: soft_percent must be in [0, 1000], got %d", p.Name, p.SoftPercent)
	}
	if p.FailMode > FailLocal {
		return fmt.Errorf("core: policy %q: unknown fail mode %d", p.Name, p.FailMode)
	}
	if p.Mode >= numModes {
		return fmt.Errorf("core: policy %q: unknown mode %d", p.Name, p.Mode)
	}
	if p.Sync < 0 || p.Sync > maxSync {
		return fmt.Errorf("core: policy %q: sync must be in [0, %v], got %v", p.Name, maxSync, p.Sync)
	}
	if p.Sync != 0 && p.Mode == ModeExact {
		return fmt.Errorf("core: policy %q: sync %v applies to mode write-back only; remove it or set mode write-back", p.Name, p.Sync)
	}
	if p.FleetSize < 0 || p.FleetSize > maxFleetSize {
		return fmt.Errorf("core: policy %q: fleet_size must be in [0, %d], got %d", p.Name, maxFleetSize, p.FleetSize)
	}
	return nil
}

// maxLimits is the most limits a [Policy] may have.
const maxLimits = 8

// validateWork bounds the state one decision reads and writes, whatever
// the number of limits: the sliding counter's buckets and the sliding
// log's slots, summed over the limits, are bounded as one limit's are
// (maxBuckets, maxLogRequests), so the worst accepted policy costs what
// the worst single limit does.
func (p *Policy) validateWork() error {
	n := int64(len(p.Limits))
	switch p.Algorithm {
	case SlidingWindowCounter:
		if b := n * int64(p.buckets()); b > maxBuckets {
			return fmt.Errorf("core: policy %q: %d limits × %d buckets = %d buckets, and every decision reads them all; at most %d in all: use at most %d buckets or fewer limits", p.Name, n, p.buckets(), b, maxBuckets, maxBuckets/n)
		}
	case SlidingWindowLog:
		var slots int64
		for _, l := range p.Limits {
			c := effective(l.capacity(), p.SoftPercent)
			if p.Elastic != nil {
				c = p.Elastic.ceiling(c)
			}
			slots += c
		}
		if slots > maxLogRequests {
			return fmt.Errorf("core: policy %q: the sliding log keeps one timestamp per request of every limit (soft and elastic overage included): %d in all, at most %d; lower the limits or use the sliding counter", p.Name, slots, maxLogRequests)
		}
	}
	return nil
}

func (p *Policy) buckets() int {
	if p.Buckets <= 0 {
		return 1
	}
	return p.Buckets
}

// effective is n raised by the soft-throttling percentage, rounded down.
func effective(n int64, softPercent int) int64 {
	if softPercent == 0 {
		return n
	}
	return n * int64(100+softPercent) / 100
}
