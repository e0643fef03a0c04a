package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
	"github.com/limitkit/limitkit/rules"
)

// Operators act on a rule's counters by rule name and identity, never by
// store key: [Server.Usage] reads them, [Server.ResetIdentity] forgets
// them, and [Server.AdminHandler] serves both over HTTP.

// ErrUnknownRule is returned (wrapped) by [Server.Usage] and
// [Server.ResetIdentity] for a name that is neither a rule of the set
// serving now nor an also: check of one.
var ErrUnknownRule = errors.New("serve: no such rule")

// ErrBadIdentity is returned (wrapped) for an identity that is empty,
// longer than 1024 bytes, holds a control character, or that the
// rule's key cannot be built from (an IP rule given no IP address).
var ErrBadIdentity = errors.New("serve: invalid identity")

// maxIdentityLen is the longest identity [Server.Usage],
// [Server.ResetIdentity] and the admin handler accept, in bytes (after the
// handler's URL decoding).
const maxIdentityLen = 1024

// AdminPath is where the examples mount [Server.AdminHandler]:
// GET and DELETE AdminPath + "<rule>/<identity>".
const AdminPath = "/admin/limits/"

// PolicyUsage is one policy's counters of an identity, as
// [Server.Usage] reports them and the admin handler writes them (JSON).
type PolicyUsage struct {
	// Policy is the store policy name: the rule's, "<rule>/<tier>" for a
	// tier, "<rule>/o-<hash>" for an override, the check's name for an
	// also: check.
	Policy string `json:"policy"`
	// Kind is "rule" (the rule's own limits, the default tier), "tier",
	// "override" or "also".
	Kind string `json:"kind"`
	// Tier is the tier's name when Kind is "tier".
	Tier string `json:"tier,omitempty"`
	// Limits are the policy's configured limits ("10 per 15m").
	Limits []string `json:"limits"`
	// Limit and Window are the binding limit's requests and window (in
	// seconds): of a policy with several limits, the one with the least
	// room now; Used, Remaining, Reset and RetryAfter are that limit's.
	Limit  int64   `json:"limit"`
	Window float64 `json:"window_seconds"`
	// Used is what the identity consumed of the binding limit, Remaining
	// what it would admit now (core.Usage). Through the fleet tier in
	// write-back mode (fleet.WithSync) units leased to the server that
	// answers and not yet spent count as remaining; those leased to other
	// servers count as used until their leases expire (one sync
	// interval; at most the lease cap per server): Used is high and
	// Remaining low by that much, never the reverse.
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// Reset is when the binding limit is full again, in Unix seconds
	// (rounded up); the current time for an identity with no state.
	Reset int64 `json:"reset"`
	// RetryAfter is the wait in seconds (fractional) until a request would
	// be admitted; 0 while Remaining > 0.
	RetryAfter float64 `json:"retry_after_seconds"`
	// PerLimit is every limit's own figures, in the order of Limits
	// (of a policy with one limit, the binding figures again); empty
	// when the store failed (Degraded) or cannot read limit by limit.
	PerLimit []LimitUsage `json:"per_limit"`
	// Degraded is true when the store failed and the figures are the fail
	// mode's; Error then says why.
	Degraded bool   `json:"degraded,omitempty"`
	Error    string `json:"error,omitempty"`
}

// LimitUsage is one limit's figures in [PolicyUsage].PerLimit, as
// core.Usage.Limits reports them: the limit's requests and window (in
// seconds), what the identity used of it and what it would admit now,
// when it is full again (Unix seconds, rounded up; the current time for
// an identity with no state) and the wait in seconds until a request
// would pass it (0 while Remaining > 0).
type LimitUsage struct {
	// Limit is the limit's requests per Window.
	Limit int64 `json:"limit"`
	// Window is the limit's window in seconds.
	Window float64 `json:"window_seconds"`
	// Used is what the identity consumed of the limit's capacity.
	Used int64 `json:"used"`
	// Remaining is what the limit would admit now.
	Remaining int64 `json:"remaining"`
	// Reset is when the limit is full again, in Unix seconds.
	Reset int64 `json:"reset"`
	// RetryAfter is the wait in seconds until a request would pass this
	// limit; 0 while Remaining > 0.
	RetryAfter float64 `json:"retry_after_seconds"`
}

// RuleUsage is [Server.Usage]'s answer.
type RuleUsage struct {
	// Rule is the name asked for; Identity the identity.
	Rule     string `json:"rule"`
	Identity string `json:"identity"`
	// Policies are the counters that apply to the identity: the rule's
	// own, each tier's (the identity's tier is read per request, so each
	// is listed), or only its override when it has one; and the also:
	// checks keyed like the rule. For an also: check's name, that check
	// alone.
	Policies []PolicyUsage `json:"policies"`
}

// adminTarget is one limiter of a rule and the store key of the identity
// under it.
type adminTarget struct {
	lim      *core.Limiter
	key      string
	kind     string
	tier     string
	override bool // an override whose client is the identity
}

// targets resolves name and identity in snap: every limiter of the rule
// (or the also: check) named name, with the identity's store key.
func (s *Server[M]) targets(snap *rules.Snapshot[M], name, identity string) ([]adminTarget, error) {
	if err := checkIdentity(identity); err != nil {
		return nil, err
	}
	set := snap.Set()
	if r, ok := set.Rule(name); ok {
		return s.ruleTargets(snap, r, identity)
	}
	for _, r := range set.Rules() {
		for i, c := range r.Also {
			if c.Name != name {
				continue
			}
			rr, _ := set.Rule(r.Name)
			client, err := s.clientKey(rr, c.Key, identity)
			if err != nil {
				return nil, err
			}
			ls := snap.RuleLimiters(rr)
			return []adminTarget{{lim: ls.Also[i], key: httplimit.StoreKey(rr.Name, client), kind: "also"}}, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownRule, name)
}

func (s *Server[M]) ruleTargets(snap *rules.Snapshot[M], r *rules.Rule, identity string) ([]adminTarget, error) {
	client, err := s.clientKey(r, r.Key, identity)
	if err != nil {
		return nil, err
	}
	key := httplimit.StoreKey(r.Name, client)
	ls := snap.RuleLimiters(r)
	out := []adminTarget{{lim: ls.Default, key: key, kind: "rule"}}
	for _, t := range r.Tiers {
		out = append(out, adminTarget{lim: ls.Tiers[t.Name], key: key, kind: "tier", tier: t.Name})
	}
	over := s.id.Override
	if over == nil {
		over = func(r *rules.Rule, c string) (string, error) { return DefaultOverride(r, c, s.id) }
	}
	for _, o := range r.Overrides {
		k, err := over(r, o.Client)
		out = append(out, adminTarget{lim: ls.Overrides[o.Client], key: key, kind: "override", override: err == nil && k == client})
	}
	for i, c := range r.Also {
		if c.Key == r.Key {
			out = append(out, adminTarget{lim: ls.Also[i], key: key, kind: "also"})
		}
	}
	return out, nil
}

// checkIdentity refuses an empty or overlong identity, or one with a
// control character.
func checkIdentity(identity string) error {
	if identity == "" || len(identity) > maxIdentityLen {
		return fmt.Errorf("%w: want 1 to %d bytes, got %d", ErrBadIdentity, maxIdentityLen, len(identity))
	}
	for i := 0; i < len(identity); i++ {
		if c := identity[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: control character at byte %d", ErrBadIdentity, i)
		}
	}
	return nil
}

// clientKey is the client key that a rule's key k gives a caller whose
// identity is identity: built by the rule's own key function from a
// request carrying it (a form field, a header, an X-API-Key, a peer
// address), or for a user key by the Identity's Override of the
// identity written as an override's client ("key:k_big") if it takes it,
// else of "user:<identity>".
func (s *Server[M]) clientKey(r *rules.Rule, k rules.Key, identity string) (string, error) {
	var key string
	var err error
	switch k.Kind {
	case "", "ip":
		key, err = ipKeyOf(s.id, identity)
	case "user":
		over := s.id.Override
		if over == nil {
			over = func(r *rules.Rule, c string) (string, error) { return DefaultOverride(r, c, s.id) }
		}
		rr := *r
		rr.Key = k
		// "<kind>:<value>" as an override names a client ("key:k_big" of
		// a principal that is an API key, "user:alice") when the Override
		// takes it; anything else is a user id
		key, err = "", errors.New("not an override's client")
		if strings.IndexByte(identity, ':') > 0 {
			key, err = over(&rr, identity)
		}
		if err != nil {
			key, err = over(&rr, "user:"+identity)
		}
	case "api_key":
		key, err = apiKeyOf(s.id, identity)
	case "header", "form":
		var f keyfuncs.Func
		if f, err = keyFunc(k, s.id); err != nil {
			break
		}
		req, _ := http.NewRequest(http.MethodPost, "/", nil)
		if k.Kind == "header" {
			req.Header.Set(k.Header, identity)
		} else {
			body := url.Values{k.Field: {identity}}.Encode()
			req, _ = http.NewRequest(http.MethodPost, "/", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		key, err = f(keyfuncs.FromHTTP(req))
	default:
		err = fmt.Errorf("unsupported key %s", k)
	}
	if err == nil && key == "" {
		err = errors.New("the key function found no key")
	}
	if err != nil {
		return "", fmt.Errorf("%w for key %s: %v", ErrBadIdentity, k, err)
	}
	return key, nil
}

// Usage reports the counters of rule (a rule of the set serving now, or
// an also: check's name) that apply to identity, the value the rule's key
// function extracts from a request: the user id (key: user; the Identity's
// Override of "user:<id>" builds its key; an identity written as an
// override's client, "key:<API key>" for a principal that is an API key
// or "user:<id>", is taken as such when the Override accepts it, so a
// user id holding a ':' is best written "user:<id>"), the API key as the client sends
// it (hashed here as the key function hashes it), the client IP (an IPv6
// address counts under its prefix), the header's or form field's value.
// It consumes nothing: one store call per policy (core.Limiter.Usage),
// through whatever store serves the rules, the fleet tier included.
// Errors: [ErrUnknownRule], [ErrBadIdentity], or the first store error
// (the figures are then the fail mode's, marked Degraded). Safe for
// concurrent use.
func (s *Server[M]) Usage(ctx context.Context, rule, identity string) (RuleUsage, error) {
	snap := s.Live().Acquire()
	defer snap.Release()
	ts, err := s.targets(snap, rule, identity)
	if err != nil {
		return RuleUsage{}, err
	}
	overridden := false // an override replaces the default and the tiers
	for _, t := range ts {
		overridden = overridden || t.override
	}
	out := RuleUsage{Rule: rule, Identity: identity, Policies: []PolicyUsage{}}
	var first error
	for _, t := range ts {
		if t.kind == "override" && !t.override || overridden && (t.kind == "rule" || t.kind == "tier") {
			continue
		}
		u, err := t.lim.Usage(ctx, t.key)
		if err != nil && first == nil {
			first = err
		}
		p := t.lim.Policy()
		pu := PolicyUsage{Policy: p.Name, Kind: t.kind, Tier: t.tier, Limit: u.Limit.Requests, Window: u.Limit.Window.Seconds(),
			Used: u.Used, Remaining: u.Remaining, RetryAfter: u.RetryAfter.Seconds(), Degraded: u.Degraded}
		for _, l := range p.Limits {
			pu.Limits = append(pu.Limits, l.String())
		}
		now := t.lim.Clock().Now()
		pu.Reset = now.Add(u.ResetAfter + time.Second - 1).Unix()
		pu.PerLimit = make([]LimitUsage, 0, len(u.Limits))
		for _, lu := range u.Limits {
			pu.PerLimit = append(pu.PerLimit, LimitUsage{Limit: lu.Limit.Requests, Window: lu.Limit.Window.Seconds(),
				Used: lu.Used, Remaining: lu.Remaining, Reset: now.Add(lu.ResetAfter + time.Second - 1).Unix(),
				RetryAfter: lu.RetryAfter.Seconds()})
		}
		if err != nil {
			pu.Error = err.Error()
		}
		out.Policies = append(out.Policies, pu)
	}
	return out, first
}

// ResetIdentity forgets every counter of rule (or of the also: check of
// that name) for identity, as [Server.Usage] reads it: the rule's own
// policy, every tier's and override's, and the also: checks keyed like
// the rule (core.Limiter.Reset on each; the identity's next request gets
// a full quota). A rule's counters are one key per identity whatever the
// routes it covers (the rule name is the key scope). Through the fleet
// tier every server honours it within the bound package fleet states.
// Errors: [ErrUnknownRule], [ErrBadIdentity], or the store's (joined; the
// other policies are reset all the same). Safe for concurrent use.
func (s *Server[M]) ResetIdentity(ctx context.Context, rule, identity string) error {
	snap := s.Live().Acquire()
	defer snap.Release()
	ts, err := s.targets(snap, rule, identity)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range ts {
		if err := t.lim.Reset(ctx, t.key); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", t.lim.Policy().Name, err))
		}
	}
	return errors.Join(errs...)
}

// AdminConfig configures [Server.AdminHandler].
type AdminConfig struct {
	// Authorize reports whether a request may read or reset counters;
	// required. [BearerToken] checks an Authorization: Bearer token.
	Authorize func(*http.Request) bool
	// Prefix is the path the handler is mounted under, ending in "/":
	// requests are Prefix + "<rule>/<identity>". Default [AdminPath].
	Prefix string
}

// BearerToken returns an [AdminConfig] Authorize that admits a request
// whose Authorization header is "Bearer <token>", compared in constant
// time (of SHA-256 digests, so that neither the token's content nor its
// length leaks through timing). The token is trimmed of surrounding white
// space, as the header's is (a token read from a file or an environment
// variable often ends in a newline), and a token that is empty after that
// admits nobody. Serve the
// admin handler over TLS or on an internal listener only: the token is a
// password.
func BearerToken(token string) func(*http.Request) bool {
	token = strings.TrimSpace(token)
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) bool {
		if token == "" {
			return false
		}
		h := r.Header.Get("Authorization")
		const scheme = "Bearer "
		if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
			return false
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(h[len(scheme):])))
		return subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
}

// AdminHandler serves the operators' surface, on any router (net/http's
// mux, gin.WrapH, echo.WrapHandler, fiber's adaptor.HTTPHandler):
//
//	GET    <prefix><rule>/<identity>   200, the RuleUsage as JSON
//	DELETE <prefix><rule>/<identity>   204, every counter forgotten (ResetIdentity)
//
// A request cfg.Authorize refuses gets 401 (before anything else, so that
// rule names do not leak); an unknown rule 404; a bad identity or path
// 400; another method 405; a store failure 503 (GET still writes the fail
// mode's figures). The identity is the path's last segment, URL-decoded
// once (escape a '/' in it as %2F); see [Server.Usage] for what it is
// per key. Mount it outside the rules' middleware, so that operators
// spend no quota. Bodies are JSON; no error body echoes the identity.
func (s *Server[M]) AdminHandler(cfg AdminConfig) (http.Handler, error) {
	if cfg.Authorize == nil {
		return nil, errors.New("serve: AdminHandler: nil Authorize; pass e.g. serve.BearerToken(token)")
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = AdminPath
	}
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("serve: AdminHandler: Prefix %q must start and end with /", prefix)
	}
	fail := func(w http.ResponseWriter, code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		b, _ := json.Marshal(map[string]string{"error": msg})
		_, _ = w.Write(append(b, '\n'))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.Authorize(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="limitkit admin"`)
			fail(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodDelete {
			w.Header().Set("Allow", "GET, HEAD, DELETE")
			fail(w, http.StatusMethodNotAllowed, "method not allowed: GET or DELETE")
			return
		}
		rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
		rule, esc, two := strings.Cut(rest, "/")
		if !ok || !two || rule == "" || strings.Contains(esc, "/") {
			fail(w, http.StatusBadRequest, "want "+prefix+"<rule>/<identity> (escape / in the identity as %2F)")
			return
		}
		identity, err := url.PathUnescape(esc)
		if err != nil {
			fail(w, http.StatusBadRequest, "the identity is not valid URL escaping")
			return
		}
		if rule, err = url.PathUnescape(rule); err != nil {
			fail(w, http.StatusBadRequest, "the rule is not valid URL escaping")
			return
		}
		var u RuleUsage
		if r.Method == http.MethodDelete {
			err = s.ResetIdentity(r.Context(), rule, identity)
		} else {
			u, err = s.Usage(r.Context(), rule, identity)
		}
		switch {
		case errors.Is(err, ErrUnknownRule):
			fail(w, http.StatusNotFound, "no such rule")
			return
		case errors.Is(err, ErrBadIdentity):
			fail(w, http.StatusBadRequest, fmt.Sprintf("invalid identity: want 1 to %d bytes without control characters, of what the rule keys by (an IP rule: an IP address)", maxIdentityLen))
			return
		case errors.Is(err, core.ErrUnsupported):
			fail(w, http.StatusNotImplemented, "the store does not implement the quota verbs")
			return
		case err != nil && r.Method == http.MethodDelete:
			fail(w, http.StatusServiceUnavailable, "the store failed; some counters may not be reset")
			return
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		}
		code := http.StatusOK
		if err != nil {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(u)
	}), nil
}
