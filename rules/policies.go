package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limitkit/limitkit/core"
)

// Bounds of the policies a rule may add to its own.
const (
	// maxTiers bounds a rule's tiers, the default not counted: core's
	// bound (core.NewTiers refuses more), as are the four below, which
	// TestBoundsAreCores checks.
	maxTiers = 16
	// maxSync bounds a rule's sync (core.Policy.Sync).
	maxSync = time.Hour
	// maxFleetSize bounds a rule's fleet_size (core.Policy.FleetSize).
	maxFleetSize = 100_000
	// maxLease bounds a concurrency rule's lease
	// (core.ConcurrencyPolicy.Lease).
	maxLease = 24 * time.Hour
	// maxCeilingPercent bounds an elastic ceiling
	// (core.Elastic.CeilingPercent).
	maxCeilingPercent = 1000
	// maxOverrides bounds a rule's overrides.
	maxOverrides = 256
	// maxAlso bounds a rule's also: checks (a middleware runs at most 8
	// checks, the rule's own included).
	maxAlso = 7
)

// tierKind says where a rule reads a request's tier.
type tierKind uint8

const (
	// the zero value: the rule has no tiers.
	_ tierKind = iota
	// tierClaim reads a claim of the caller's verified JWT ("claim:plan").
	tierClaim
	// tierHeader reads a header ("header:X-Plan"). Only safe for a header
	// a trusted proxy sets: a client sending it picks its own plan.
	tierHeader
)

// tierSource is where a rule reads the tier: "claim:<name>" or
// "header:<Name>". The zero value is no tier.
type tierSource struct {
	Kind tierKind
	// Name is the claim, or the canonical header name.
	Name string
}

// String returns "claim:plan", "header:X-Plan", or "" for none.
func (t tierSource) String() string {
	switch t.Kind {
	case tierClaim:
		return "claim:" + t.Name
	case tierHeader:
		return "header:" + t.Name
	}
	return ""
}

// parseTierSource parses "claim:<name>" and "header:<Name>".
func parseTierSource(s string) (tierSource, error) {
	kind, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.TrimSpace(name)
	switch {
	case !ok || name == "" || len(name) > 128:
	case strings.EqualFold(kind, "claim"):
		return tierSource{Kind: tierClaim, Name: name}, nil
	case strings.EqualFold(kind, "header") && isToken(name):
		return tierSource{Kind: tierHeader, Name: textproto.CanonicalMIMEHeaderKey(name)}, nil
	}
	return tierSource{}, fmt.Errorf("unknown tier source %q (want claim:<name>, e.g. claim:plan, or header:<Name>, e.g. header:X-Plan)", s)
}

// Tier is one named tier of a rule and its limits.
type Tier struct {
	// Name is the tier's value as the request carries it ("pro").
	Name string
	// Limits replace the rule's limits for callers of this tier.
	Limits []core.Limit
}

// Override is the limits of one client, whatever its tier.
type Override struct {
	// Client names the client as "<kind>:<value>": "user:<id>" (the
	// subject of a verified JWT), "key:<API key>" (the X-API-Key it
	// presents), "ip:<address>". The serving application turns it into
	// its key function's key (rules/serve.DefaultOverride).
	Client string
	// Limits replace the rule's and its tier's limits for the client.
	Limits []core.Limit
}

// Check is one more check of a rule ("also:"): the request must pass it
// too, keyed by its own key under its own policy named Name (the rule's
// switches apply). Login throttling's per-IP limit beside the
// per-username one.
type Check struct {
	Name   string
	Key    Key
	Limits []core.Limit
}

// Count is a rule's counting by outcome: only responses whose status
// matches count against the quota (httplimit.WithOutcome).
type Count struct {
	// Statuses lists the statuses that count; empty when AtLeast is set.
	Statuses []int
	// AtLeast counts every status >= AtLeast; 0 when Statuses is set.
	AtLeast int
	// ResetOnSuccess: a response below 400 that does not count resets the
	// client's count under the rule's own policy (never its also: checks).
	ResetOnSuccess bool
	// ChargeFirst takes the quota before the handler and refunds it when
	// the response does not count (exact under concurrency); by default the
	// quota is peeked before and charged after.
	ChargeFirst bool
}

// Counts reports whether a response of this status counts.
func (c *Count) Counts(status int) bool {
	if c.AtLeast > 0 {
		return status >= c.AtLeast
	}
	return slices.Contains(c.Statuses, status)
}

// tierPolicyName is the policy name of tier tier of rule rule:
// "<rule>/<tier>".
func tierPolicyName(rule, tier string) string { return rule + "/" + tier }

// overridePolicyName is the policy name of an override of rule rule:
// "<rule>/o-<the first 8 bytes of SHA-256(client), hex>" (an API key
// never appears in a header, a log or a metric label).
func overridePolicyName(rule, client string) string {
	sum := sha256.Sum256([]byte(client))
	return rule + "/o-" + hex.EncodeToString(sum[:8])
}

// policiesDoc holds a rule's fields of this file.
type policiesDoc struct {
	Tier      string                `yaml:"tier,omitempty" json:"tier,omitempty"`
	Tiers     map[string][]limitDoc `yaml:"tiers,omitempty" json:"tiers,omitempty"`
	Overrides map[string][]limitDoc `yaml:"overrides,omitempty" json:"overrides,omitempty"`
	Count     *countDoc             `yaml:"count,omitempty" json:"count,omitempty"`
	Also      []alsoDoc             `yaml:"also,omitempty" json:"also,omitempty"`
}

var (
	policiesKeys = []string{"tier", "tiers", "overrides", "count", "also"}
	countKeys    = []string{"status", "reset_on", "charge"}
	alsoKeys     = []string{"name", "key", "limits"}
)

type countDoc struct {
	Status  statusDoc `yaml:"status" json:"status"`
	ResetOn string    `yaml:"reset_on,omitempty" json:"reset_on,omitempty"`
	Charge  string    `yaml:"charge,omitempty" json:"charge,omitempty"`
}

type alsoDoc struct {
	Name   string     `yaml:"name" json:"name"`
	Key    string     `yaml:"key" json:"key"`
	Limits []limitDoc `yaml:"limits,flow" json:"limits"`
}

// statusDoc is count's status as written: a list of codes, one code, or
// a comparison (">=400").
type statusDoc struct {
	codes []int
	text  string
	set   bool
}

func (s *statusDoc) UnmarshalYAML(n *yaml.Node) error {
	s.set = true
	switch n.Kind {
	case yaml.ScalarNode:
		if c, err := strconv.Atoi(n.Value); err == nil {
			s.codes = []int{c}
			return nil
		}
		s.text = n.Value
		return nil
	case yaml.SequenceNode:
		return n.Decode(&s.codes)
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(`line %d: status is a list of codes ([401]) or a comparison (">=400")`, n.Line)}}
}

func (s statusDoc) MarshalYAML() (any, error) {
	if s.text != "" {
		return s.text, nil
	}
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, c := range s.codes {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(c)})
	}
	return n, nil
}

func (s *statusDoc) UnmarshalJSON(b []byte) error {
	s.set = true
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &s.text)
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &s.codes)
	}
	var c int
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf(`status is a list of codes ([401]) or a comparison (">=400"): %w`, err)
	}
	s.codes = []int{c}
	return nil
}

func (s statusDoc) MarshalJSON() ([]byte, error) {
	if s.text != "" {
		return json.Marshal(s.text)
	}
	return json.Marshal(s.codes)
}

// resolvePolicies validates d's tier, tiers, overrides, count and also
// into r, whose name, key, identity and (when written) limits are set.
// It reports problems through fail and registers every added policy name
// with claim, which reports a name already in use.
func resolvePolicies(d *ruleDoc, r *Rule, e Error, at func(string) int, c *collector, fail func(field, msg string), claim func(field, name string)) {
	p := &d.policiesDoc
	resolveTiers(d, r, e, at, c, fail, claim)
	resolveOverrides(p.Overrides, r, e, at, c, fail, claim)
	if p.Count != nil {
		r.Count = resolveCount(p.Count, fail)
	}
	resolveAlso(p.Also, r, e, at, c, fail, claim)
}

// resolveTiers validates d's tier source and tier table into r: the
// default tier's limits become the rule's, each named tier a policy.
func resolveTiers(d *ruleDoc, r *Rule, e Error, at func(string) int, c *collector, fail func(field, msg string), claim func(field, name string)) {
	p := &d.policiesDoc
	if p.Tier != "" {
		t, err := parseTierSource(p.Tier)
		if err != nil {
			fail("tier", err.Error())
		}
		r.Tier = t.String()
	}
	switch {
	case p.Tier != "" && len(p.Tiers) == 0:
		fail("tiers", "tier: is set but tiers: is missing; list each tier's limits, e.g. tiers: {pro: [\"1000 per 1m\"], default: [\"100 per 1m\"]}")
	case p.Tier == "" && len(p.Tiers) > 0:
		fail("tier", "tiers: needs tier: to say where the request's tier is read (claim:plan or header:X-Plan)")
	}
	if len(p.Tiers) == 0 {
		return
	}
	def, hasDef := p.Tiers["default"]
	switch {
	case hasDef && len(d.Limits) > 0:
		fail("limits", "write the default tier's limits once: in tiers.default or in limits, not both")
	case !hasDef && len(d.Limits) == 0:
		fail("tiers", "no default tier: add tiers.default (the limits of a request with a missing or unknown tier), or the rule's limits")
	case hasDef:
		r.Limits = parseLimits(def, e, at, c)
	}
	named := len(p.Tiers)
	if hasDef {
		named--
	}
	switch {
	case named > maxTiers:
		fail("tiers", fmt.Sprintf("%d tiers, at most %d (each is a policy with its own state)", named, maxTiers))
	case named == 0:
		// every request would get the default: a table with no
		// tier is a mistake (and would not encode back)
		fail("tiers", "only a default tier: name at least one tier beside it, e.g. pro: [\"1000 per 1m\"], or drop tier: and tiers: and write the limits in limits:")
	}
	for _, name := range sortedNames(p.Tiers) {
		if name == "default" {
			continue
		}
		if !validName(name, false) {
			fail("tiers", fmt.Sprintf("tier %q: use 1 to 64 of the characters A-Z a-z 0-9 _ . : -", name))
			continue
		}
		te := e
		te.Field = "tiers." + name
		t := Tier{Name: name, Limits: parseLimits(p.Tiers[name], te, at, c)}
		claim("tiers."+name, tierPolicyName(r.Name, name))
		r.Tiers = append(r.Tiers, t)
	}
}

// resolveOverrides validates a rule's per-client overrides into r, in
// client order.
func resolveOverrides(overrides map[string][]limitDoc, r *Rule, e Error, at func(string) int, c *collector, fail func(field, msg string), claim func(field, name string)) {
	if len(overrides) > maxOverrides {
		fail("overrides", fmt.Sprintf("%d overrides, at most %d", len(overrides), maxOverrides))
	}
	for _, client := range sortedNames(overrides) {
		kind, value, ok := strings.Cut(client, ":")
		if !ok || value == "" || len(value) > 256 || !slices.Contains([]string{"user", "key", "ip"}, kind) {
			fail("overrides", fmt.Sprintf("client %q: write user:<id>, key:<API key> or ip:<address>", client))
			continue
		}
		oe := e
		oe.Field = "overrides." + client
		r.Overrides = append(r.Overrides, Override{Client: client, Limits: parseLimits(overrides[client], oe, at, c)})
		claim("overrides", overridePolicyName(r.Name, client))
	}
}

// resolveCount validates a rule's count: its statuses, reset_on and
// charge.
func resolveCount(d *countDoc, fail func(field, msg string)) *Count {
	cnt := &Count{}
	switch st := d.Status; {
	case !st.set || (st.text == "" && len(st.codes) == 0):
		fail("count", `count needs status: the statuses that count, e.g. status: [401] or status: ">=400"`)
	case st.text != "":
		t := strings.TrimSpace(st.text)
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(t, ">=")))
		if !strings.HasPrefix(t, ">=") || err != nil || n < 100 || n > 599 {
			fail("count", fmt.Sprintf(`status %q: write a list of codes ([401, 403]) or ">=<code>" (">=400")`, st.text))
		}
		cnt.AtLeast = n
	default:
		for _, code := range st.codes {
			if code < 100 || code > 599 {
				fail("count", fmt.Sprintf("status %d is not an HTTP status (100 to 599)", code))
			}
		}
		cnt.Statuses = slices.Clone(st.codes)
	}
	switch strings.ToLower(strings.TrimSpace(d.ResetOn)) {
	case "":
	case "success":
		cnt.ResetOnSuccess = true
	default:
		fail("count", fmt.Sprintf("reset_on %q: the only value is success (a response below 400 that does not count clears the client's count)", d.ResetOn))
	}
	switch strings.ToLower(strings.TrimSpace(d.Charge)) {
	case "", "after":
	case "first":
		cnt.ChargeFirst = true
	default:
		fail("count", fmt.Sprintf("charge %q: write after (peek before the handler, charge after the response; the default) or first (take before, refund when it does not count)", d.Charge))
	}
	return cnt
}

// resolveAlso validates a rule's also: checks into r.
func resolveAlso(also []alsoDoc, r *Rule, e Error, at func(string) int, c *collector, fail func(field, msg string), claim func(field, name string)) {
	if len(also) > maxAlso {
		fail("also", fmt.Sprintf("%d checks, at most %d", len(also), maxAlso))
	}
	for j, a := range also {
		field := fmt.Sprintf("also[%d]", j)
		ae := e
		ae.Field = field + ".limits"
		ck := Check{Name: a.Name, Limits: parseLimits(a.Limits, ae, at, c)}
		if !validName(a.Name, false) {
			fail(field, "name: use 1 to 64 of the characters A-Z a-z 0-9 _ . : - (it names the check's policy)")
		} else {
			claim(field, a.Name)
		}
		var err error
		if ck.Key, err = parseKey(a.Key); err != nil {
			fail(field, err.Error())
		} else if ck.Key.Kind == keyUser && r.id != idAuthenticated {
			fail(field, "key user needs the rule's identity: authenticated")
		}
		r.Also = append(r.Also, ck)
	}
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// extraPolicies are the policies a rule adds to its own, in the order
// [Set.Policies] lists them: its tiers' (by name), its overrides' (by
// client), its also: checks'. Each has the rule's switches.
func (r *Rule) extraPolicies() []core.Policy {
	var out []core.Policy
	with := func(name string, limits []core.Limit) {
		p := r.Policy()
		p.Name, p.Limits = name, slices.Clone(limits)
		out = append(out, p)
	}
	for _, t := range r.Tiers {
		with(tierPolicyName(r.Name, t.Name), t.Limits)
	}
	for _, o := range r.Overrides {
		with(overridePolicyName(r.Name, o.Client), o.Limits)
	}
	for _, a := range r.Also {
		with(a.Name, a.Limits)
	}
	return out
}

// policiesDoc is the inverse of resolvePolicies, for the encoders.
func (r *Rule) policiesDoc() policiesDoc {
	var d policiesDoc
	limits := func(ls []core.Limit) []limitDoc {
		out := make([]limitDoc, len(ls))
		for i, l := range ls {
			out[i].text = l.String()
		}
		return out
	}
	d.Tier = r.Tier
	if len(r.Tiers) > 0 {
		d.Tiers = map[string][]limitDoc{}
		for _, t := range r.Tiers {
			d.Tiers[t.Name] = limits(t.Limits)
		}
	}
	if len(r.Overrides) > 0 {
		d.Overrides = map[string][]limitDoc{}
		for _, o := range r.Overrides {
			d.Overrides[o.Client] = limits(o.Limits)
		}
	}
	if c := r.Count; c != nil {
		cd := &countDoc{Status: statusDoc{codes: c.Statuses, set: true}}
		if c.AtLeast > 0 {
			cd.Status = statusDoc{text: ">=" + strconv.Itoa(c.AtLeast), set: true}
		}
		if c.ResetOnSuccess {
			cd.ResetOn = "success"
		}
		if c.ChargeFirst {
			cd.Charge = "first"
		}
		d.Count = cd
	}
	for _, a := range r.Also {
		d.Also = append(d.Also, alsoDoc{Name: a.Name, Key: a.Key.String(), Limits: limits(a.Limits)})
	}
	return d
}

// checkPoliciesYAML reports unknown fields in a rule's count: mapping and
// also: entries (the typed decode is not strict).
func checkPoliciesYAML(rule *yaml.Node, e Error, addKeys func(*yaml.Node, []string, Error) map[string]int) {
	if rule.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(rule.Content); i += 2 {
		k, v := rule.Content[i].Value, rule.Content[i+1]
		switch {
		case k == "count" && v.Kind == yaml.MappingNode:
			ce := e
			ce.Field = "count"
			addKeys(v, countKeys, ce)
		case k == "also" && v.Kind == yaml.SequenceNode:
			for j, item := range v.Content {
				ae := e
				ae.Field = fmt.Sprintf("also[%d]", j)
				addKeys(item, alsoKeys, ae)
			}
		}
	}
}

// policiesJSONKeys are the known fields of a JSON object at path, when it
// is a rule's count or one of its also: entries; nil otherwise.
func policiesJSONKeys(path string) []string {
	rest, ok := strings.CutPrefix(path, "rules[")
	if !ok {
		return nil
	}
	_, field, ok := strings.Cut(rest, "].")
	switch {
	case !ok:
		return nil
	case field == "count":
		return countKeys
	case strings.HasPrefix(field, "also[") && strings.HasSuffix(field, "]") && !strings.Contains(field, "."):
		return alsoKeys
	}
	return nil
}

// policiesMatch describes what a rule's added policies change in how it
// keys and counts requests, their limits left out (those are the
// policies' own: a changed tier limit is a LimitsChanged of the tier's
// policy, not an update of the rule).
func (r *Rule) policiesMatch() string {
	var b strings.Builder
	b.WriteString(r.Tier)
	for _, t := range r.Tiers {
		b.WriteString("|t:" + t.Name)
	}
	for _, o := range r.Overrides {
		b.WriteString("|o:" + o.Client)
	}
	for _, a := range r.Also {
		b.WriteString("|a:" + a.Name + "=" + a.Key.String())
	}
	if c := r.Count; c != nil {
		fmt.Fprintf(&b, "|c:%v/%d/%t/%t", c.Statuses, c.AtLeast, c.ResetOnSuccess, c.ChargeFirst)
	}
	return b.String()
}
