package rules

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
)

// identity is the class of caller a rule applies to (Rule.Identity's
// text, parsed). The zero value is idAny.
type identity uint8

const (
	// idAny matches every caller.
	idAny identity = iota
	// Authenticated matches callers the application identified (a verified
	// JWT, an API key).
	idAuthenticated
	// Anonymous matches callers the application did not identify.
	idAnonymous
)

// String returns "any", "authenticated" or "anonymous".
func (i identity) String() string {
	switch i {
	case idAny:
		return "any"
	case idAuthenticated:
		return "authenticated"
	case idAnonymous:
		return "anonymous"
	}
	return fmt.Sprintf("identity(%d)", uint8(i))
}

// parseIdentity parses "authenticated", "anonymous" or "any" (the empty
// string is "any"); case does not matter.
func parseIdentity(s string) (identity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "any":
		return idAny, nil
	case "authenticated":
		return idAuthenticated, nil
	case "anonymous":
		return idAnonymous, nil
	}
	return 0, fmt.Errorf("unknown identity %q (want authenticated, anonymous or any)", s)
}

// matches reports whether a caller with the given authentication state is
// in the class.
func (i identity) matches(authenticated bool) bool {
	switch i {
	case idAuthenticated:
		return authenticated
	case idAnonymous:
		return !authenticated
	}
	return true
}

// Key names what a rule counts by. Its text form is "ip", "user",
// "api_key", "header:<Name>" or "form:<field>". The zero value counts by
// IP, as Kind "ip" does.
type Key struct {
	// Kind says which property of a request the rule counts by, as the
	// rules file writes it:
	//
	//   - "ip": the client IP (as the application's trusted-proxy
	//     configuration resolves it; IPv6 aggregated to a prefix). ""
	//     means "ip" too.
	//   - "user": the authenticated principal: the user ID of a verified
	//     JWT, or the API key when that is how the caller authenticated.
	//     Requires identity: authenticated.
	//   - "api_key": the API key the caller presented.
	//   - "header": the value of the header named in Header. Only safe for
	//     headers a trusted component sets: a client chooses its own header
	//     values and can rotate them to escape the limit.
	//   - "form": the value of the form field named in Field of an
	//     urlencoded or multipart form body (keyfuncs.FormField: the body
	//     read up to 64 KiB and restored for the handler; a request whose
	//     field it cannot read as the frameworks would — a longer body,
	//     another encoding, bad escaping, the field in the query string,
	//     conflicting values — is refused with 400, 413 or 415, never
	//     keyed by the IP; the handler reads the counted value with
	//     httplimit.Identity). A login rule keys on the username this way.
	//     Client-chosen: pair it with an IP check (also:) so that rotating
	//     usernames does not escape.
	//
	// Parse always sets it (the default key is "user" under identity:
	// authenticated, else "ip").
	Kind string
	// Header is the canonical header name when Kind is "header"; empty
	// otherwise.
	Header string
	// Field is the form field when Kind is "form"; empty otherwise.
	Field string
}

// The kinds of a Key.
const (
	keyIP     = "ip"
	keyUser   = "user"
	keyAPIKey = "api_key"
	keyHeader = "header"
	keyForm   = "form"
)

// String returns the text form: "ip", "user", "api_key", "header:X-Tenant",
// "form:username".
func (k Key) String() string {
	switch k.Kind {
	case "":
		return keyIP
	case keyHeader:
		return "header:" + k.Header
	case keyForm:
		return "form:" + k.Field
	}
	return k.Kind
}

// parseKey parses "ip", "user", "api_key" (or "api-key"),
// "header:<Name>" and "form:<field>". Header names are canonicalized
// (x-tenant → X-Tenant).
func parseKey(s string) (Key, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "ip":
		return Key{Kind: keyIP}, nil
	case "user":
		return Key{Kind: keyUser}, nil
	case "api_key", "api-key", "apikey":
		return Key{Kind: keyAPIKey}, nil
	}
	if len(t) > 7 && strings.EqualFold(t[:7], "header:") {
		name := strings.TrimSpace(t[7:])
		if !isToken(name) || len(name) > 128 {
			return Key{}, fmt.Errorf("key %q: %q is not a valid header name", s, name)
		}
		return Key{Kind: keyHeader, Header: textproto.CanonicalMIMEHeaderKey(name)}, nil
	}
	if len(t) > 5 && strings.EqualFold(t[:5], "form:") {
		name := strings.TrimSpace(t[5:])
		if name == "" || len(name) > 128 || strings.ContainsAny(name, "&=%+ ") {
			return Key{}, fmt.Errorf("key %q: %q is not a plain form field name", s, name)
		}
		return Key{Kind: keyForm, Field: name}, nil
	}
	return Key{}, fmt.Errorf("unknown key %q (want user, api_key, ip, header:<Name> or form:<field>)", s)
}

// isToken reports whether s is a non-empty RFC 9110 token (method and
// header-name syntax).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Rule is one validated rule: which requests it matches (Methods, Route,
// Identity), what it counts them by (Key), and the policy it applies.
// Defaults from the file's "defaults" section are already applied.
//
// Rules come from [Parse], [LoadFile] or [Default]; a Rule obtained from a
// [Set] must not be modified (the Set and its matcher share it). A Rule is
// safe for concurrent reads.
type Rule struct {
	// Name is the rule's unique name, used as the policy name (and so in
	// store keys and the RateLimit-Policy header).
	Name string
	// Methods are the upper-case HTTP methods the rule matches; empty means
	// any method. GET also matches HEAD.
	Methods []string
	// Route is the route pattern (see the package doc for the syntax).
	Route string
	// Identity is the class of caller the rule matches: "authenticated"
	// (callers the application identified: a verified JWT, an API key),
	// "anonymous" (callers it did not) or "any" (every caller; the
	// default).
	Identity string
	id       identity // Identity, parsed
	// Key is what the rule counts by. Defaults to user for authenticated
	// rules and ip otherwise.
	Key Key
	// Algorithm counts the limits. Default GCRA (or the file's default);
	// fixed_window for a rule with calendar limits ("5 per calendar month").
	Algorithm core.Algorithm
	// Limits must all hold; at least one. A Burst equal to Requests is
	// normalized to 0 (they mean the same).
	Limits []core.Limit
	// Buckets is the sliding window counter's sub-window count (0 = 1).
	Buckets int
	// Shadow reports would-be denials without denying.
	Shadow bool
	// SoftPercent tolerates this percentage over each limit.
	SoftPercent int
	// CountDenied makes denied requests consume quota.
	CountDenied bool
	// FailMode is what the limiter decides when the store fails (open,
	// closed, or local: the fleet tier's local fallback).
	FailMode core.FailMode
	// Mode, Sync and FleetSize configure the fleet tier for this rule
	// (core.Policy's fields of the same names): mode exact or write-back,
	// the write-back sync interval, and FailLocal's fleet size. Zero
	// values take the tier's defaults; other stores ignore them.
	Mode      core.Mode
	Sync      time.Duration
	FleetSize int
	// Elastic is the rule's elastic throttling; nil for hard limits. Its
	// capacity signals are attached by [Set.WithSignals].
	Elastic *Elastic
	signal  core.CapacitySignal // set by WithSignals
	// Tier is where the request's tier is read (tier:): "claim:<name>"
	// (a claim of the caller's verified JWT), "header:<Name>" (a header,
	// its name canonical; only safe for a header a trusted proxy sets: a
	// client sending it picks its own plan), or "" for none. Tiers are the
	// limits of each named tier (tiers:, sorted by name; the default
	// tier's limits are Limits, the rule's own policy). Each tier is a
	// policy of its own named "<rule>/<tier>": tiers' counters never mix.
	Tier  string
	Tiers []Tier
	// Overrides are the limits of individual clients (overrides:, sorted
	// by client), each a policy named "<rule>/o-<the first 8 bytes of
	// SHA-256(client), hex>".
	Overrides []Override
	// Concurrency is the most requests of one key the rule lets run at
	// once (concurrency:), held from admission until the handler returns;
	// 0 for none. See core.Concurrency. A rule with only concurrency: has
	// Limits set to one limit no client reaches (2^30 per hour), so
	// that its headers are the concurrency limit's.
	Concurrency int64
	// Lease is the concurrency limit's lease (lease:): a crashed holder's
	// slot comes back within it. 0 with Concurrency means
	// core.DefaultLease.
	Lease    time.Duration
	concOnly bool // only concurrency: (Limits is concOnlyLimit)
	// Count is the rule's counting by outcome (count:), nil when every
	// request counts.
	Count *Count
	// Also are further checks every request of the rule must pass
	// (also:), each its own policy under its own key.
	Also []Check
	// Index is the rule's position in the file's rules list (0-based).
	Index int
	// Line is the rule's line in the source file (1-based); 0 when unknown.
	Line int

	pat pattern
}

// Policy returns the rule's policy, named after the rule. It was validated
// when the rule was loaded; the Limits slice is a copy the caller may keep.
// An elastic rule's policy has a signal that never has room (it decides as
// its hard limits) unless the Set came from [Set.WithSignals].
func (r *Rule) Policy() core.Policy {
	return core.Policy{
		Name:        r.Name,
		Algorithm:   r.Algorithm,
		Limits:      slices.Clone(r.Limits),
		Buckets:     r.Buckets,
		CountDenied: r.CountDenied,
		SoftPercent: r.SoftPercent,
		Shadow:      r.Shadow,
		FailMode:    r.FailMode,
		Mode:        r.Mode,
		Sync:        r.Sync,
		FleetSize:   r.FleetSize,
		Elastic:     r.Elastic.policy(r.signal),
	}
}

// matchesMethod reports whether the rule applies to method.
func (r *Rule) matchesMethod(method string) bool {
	if len(r.Methods) == 0 {
		return true
	}
	for _, m := range r.Methods {
		if m == method || m == "GET" && method == "HEAD" {
			return true
		}
	}
	return false
}

// Descriptor is a generic rule in the design notes' form
// domain / key / unit / requests ("auth / login / minute / 10"): a named
// policy that is not bound to a route. Application code looks it up with
// [Set.Descriptor] and applies it where the event happens (a login
// attempt, an e-mail sent), choosing the key itself (the account, the IP).
//
// Its policy is named "<domain>/<key>". A Descriptor obtained from a Set
// must not be modified.
type Descriptor struct {
	// Domain groups descriptors ("auth", "messaging").
	Domain string
	// Key names the limited event within the domain ("login", "email").
	Key string
	// Algorithm, Limits and the switches have the meaning of [Rule]'s
	// fields. A descriptor written as unit/requests has one limit of
	// requests per one unit.
	Algorithm   core.Algorithm
	Limits      []core.Limit
	Buckets     int
	Shadow      bool
	SoftPercent int
	CountDenied bool
	FailMode    core.FailMode
	Mode        core.Mode
	Sync        time.Duration
	FleetSize   int
	Elastic     *Elastic
	signal      core.CapacitySignal // set by WithSignals
	// Index is the descriptor's position in the file's descriptors list.
	Index int
	// Line is the descriptor's line in the source (1-based); 0 if unknown.
	Line int
}

// Name returns "<domain>/<key>", the descriptor's policy name.
func (d *Descriptor) Name() string { return d.Domain + "/" + d.Key }

// Policy returns the descriptor's validated policy, named [Descriptor.Name].
func (d *Descriptor) Policy() core.Policy {
	return core.Policy{
		Name:        d.Name(),
		Algorithm:   d.Algorithm,
		Limits:      slices.Clone(d.Limits),
		Buckets:     d.Buckets,
		CountDenied: d.CountDenied,
		SoftPercent: d.SoftPercent,
		Shadow:      d.Shadow,
		FailMode:    d.FailMode,
		Mode:        d.Mode,
		Sync:        d.Sync,
		FleetSize:   d.FleetSize,
		Elastic:     d.Elastic.policy(d.signal),
	}
}

// Set is a validated, immutable collection of rules and descriptors with
// a matcher. Build one with [Parse], [LoadFile] or [Default]. The
// zero Set has no rules and matches nothing. A Set is safe for concurrent
// use.
type Set struct {
	rules       []Rule
	order       []int // indexes into rules, most specific first
	index       *node // the rules' patterns by segment (see Match)
	descriptors []Descriptor
	sig         *Signals // attached by WithSignals; nil for none
}

// Rules returns the rules in file order. The slice is a copy; the Rules
// share their Methods and Limits slices with the Set, which must not be
// modified.
func (s *Set) Rules() []Rule { return slices.Clone(s.rules) }

// Descriptor returns the descriptor with the given domain and key, or
// false.
func (s *Set) Descriptor(domain, key string) (*Descriptor, bool) {
	for i := range s.descriptors {
		if s.descriptors[i].Domain == domain && s.descriptors[i].Key == key {
			return &s.descriptors[i], true
		}
	}
	return nil, false
}

// Rule returns the rule with the given name, or false.
func (s *Set) Rule(name string) (*Rule, bool) {
	for i := range s.rules {
		if s.rules[i].Name == name {
			return &s.rules[i], true
		}
	}
	return nil, false
}

// Match returns the most specific rule matching a request, or nil when no
// rule matches (the request is then not limited by this Set). path is the
// request's URL path or, better, the route pattern the router matched (see
// the package doc on why); authenticated says whether the application
// identified the caller. The precedence is documented in the package doc.
//
// Match does not allocate; the returned Rule must not be modified.
func (s *Set) Match(method, path string, authenticated bool) *Rule {
	if s.index == nil || path == "" || path[0] != '/' {
		return nil // no pattern matches a path without its leading "/"
	}
	m := matching{s: s, method: method, auth: authenticated, best: len(s.order)}
	m.walk(s.index, path[1:])
	if m.best == len(s.order) {
		return nil
	}
	return &s.rules[s.order[m.best]]
}

// Policies returns every rule's policy in file order, then every
// descriptor's, then the policies rules add to their own (each rule's
// tiers', overrides' and also: checks', in file order).
func (s *Set) Policies() []core.Policy {
	out := make([]core.Policy, 0, len(s.rules)+len(s.descriptors))
	for i := range s.rules {
		out = append(out, s.rules[i].Policy())
	}
	for i := range s.descriptors {
		out = append(out, s.descriptors[i].Policy())
	}
	for i := range s.rules {
		out = append(out, s.rules[i].extraPolicies()...)
	}
	return out
}
