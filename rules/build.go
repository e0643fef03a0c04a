package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limitkit/limitkit/core"
)

// switches is the resolved form of switchesDoc.
type switches struct {
	algorithm   core.Algorithm
	buckets     int
	shadow      bool
	softPercent int
	countDenied bool
	failMode    core.FailMode
	mode        core.Mode
	sync        time.Duration
	fleetSize   int
	elastic     *Elastic
	// algorithmSet: the algorithm was written (else a rule with calendar
	// limits gets fixed_window)
	algorithmSet bool
}

// collector gathers errors up to maxErrors. cal is the calendar
// defaults (timezone, week_start) of the rule whose limits are being
// parsed, nil outside one.
type collector struct {
	errs []error
	cal  *calendarDefaults
}

func (c *collector) add(e *Error) {
	if len(c.errs) < maxErrors {
		c.errs = append(c.errs, e)
	}
}

// full reports whether further problems would be dropped: callers skip
// composing messages (a did-you-mean costs an edit distance) then.
func (c *collector) full() bool { return len(c.errs) >= maxErrors }

func (c *collector) err() error { return errors.Join(c.errs...) }

// resolve applies s over base; errors name field lines through at.
func resolveSwitches(s *switchesDoc, base switches, e Error, at func(string) int, c *collector) switches {
	out := base
	fail := func(field, msg string) {
		e := e
		e.Field, e.Line, e.Msg = field, at(field), msg
		c.add(&e)
	}
	if s.Algorithm != nil {
		var a core.Algorithm
		if err := a.UnmarshalText([]byte(*s.Algorithm)); err != nil {
			fail("algorithm", strings.TrimPrefix(err.Error(), "core: "))
		}
		out.algorithm, out.algorithmSet = a, true
		if a != core.SlidingWindowCounter {
			out.buckets = 0 // a default bucket count applies to sliding_counter only
		}
	}
	if s.Buckets != nil {
		out.buckets = *s.Buckets
	}
	if s.Shadow != nil {
		out.shadow = *s.Shadow
	}
	if s.SoftPercent != nil {
		out.softPercent = *s.SoftPercent
	}
	if s.CountDenied != nil {
		out.countDenied = *s.CountDenied
	}
	resolveServing(s, &out, fail)
	return out
}

// resolveServing applies s's switches of how a policy is served (fail
// mode, mode, sync, elastic, fleet size) over out.
func resolveServing(s *switchesDoc, out *switches, fail func(field, msg string)) {
	if s.FailMode != nil {
		var m core.FailMode
		if err := m.UnmarshalText([]byte(*s.FailMode)); err != nil {
			fail("fail_mode", strings.TrimPrefix(err.Error(), "core: "))
		}
		out.failMode = m
	}
	if s.Mode != nil {
		var m core.Mode
		if err := m.UnmarshalText([]byte(*s.Mode)); err != nil {
			fail("mode", strings.TrimPrefix(err.Error(), "core: "))
		}
		out.mode = m
		if m == core.ModeExact {
			out.sync = 0 // a default sync applies to write-back only
		}
	}
	if s.Sync != nil {
		d, err := time.ParseDuration(strings.TrimSpace(*s.Sync))
		switch {
		case err != nil:
			fail("sync", fmt.Sprintf("%q is not a duration; write e.g. 100ms or 1s", *s.Sync))
		case d <= 0 || d > maxSync:
			fail("sync", fmt.Sprintf("%q must be above 0 and at most %v (leave sync out, or write mode: exact, for exact decisions)", *s.Sync, maxSync))
		default:
			out.sync = d
		}
	}
	if s.Elastic != nil {
		out.elastic = resolveElastic(s.Elastic, fail)
	}
	if s.FleetSize != nil {
		if n := *s.FleetSize; n < 1 || n > maxFleetSize {
			fail("fleet_size", fmt.Sprintf("%d must be in [1, %d]: the number of servers sharing the store", n, maxFleetSize))
		} else {
			out.fleetSize = n
		}
	}
}

// parseLimits resolves a limits list.
func parseLimits(docs []limitDoc, e Error, at func(string) int, c *collector) []core.Limit {
	field := "limits" // a tier's, an override's or a check's limits name their own field
	if e.Field != "" {
		field = e.Field
	}
	if len(docs) == 0 {
		e.Field, e.Line, e.Msg = field, at("limits"), `no limits; add at least one, e.g. limits: ["200 per 1m"]`
		c.add(&e)
		return nil
	}
	out := make([]core.Limit, 0, len(docs))
	for j, d := range docs {
		var l core.Limit
		var err error
		if d.structured {
			l = core.Limit{Requests: d.requests, Burst: d.burst}
			switch {
			case d.requests <= 0:
				err = fmt.Errorf("requests: %d is not a positive whole number", d.requests)
			case d.burst < 0:
				err = fmt.Errorf("burst: %d is negative", d.burst)
			default:
				l.Window, err = parseWindow(strings.TrimSpace(d.window))
			}
		} else {
			l, err = parseLimit(d.text, c.cal)
		}
		if err != nil {
			e := e
			e.Field, e.Line, e.Msg = fmt.Sprintf("%s[%d]", field, j), d.line, err.Error()
			if e.Line == 0 {
				e.Line = at("limits")
			}
			c.add(&e)
			continue
		}
		if l.Burst == l.Requests {
			l.Burst = 0
		}
		out = append(out, l)
	}
	return out
}

// validatePolicy runs core's validation and reports its message under the
// entry's context.
func validatePolicy(p *core.Policy, e Error, at func(string) int, c *collector) {
	err := p.Validate()
	if err == nil {
		return
	}
	msg := strings.TrimPrefix(err.Error(), "core: ")
	msg = strings.TrimPrefix(msg, "policy "+strconv.Quote(p.Name)+": ")
	e.Field = "policy"
	if strings.Contains(msg, " limits, at most") {
		msg = "limits: " + msg
	}
	for _, f := range []string{"limits", "buckets", "soft_percent", "name"} {
		if strings.HasPrefix(msg, f) {
			e.Field = f
			if i := strings.Index(msg, ": "); f == "limits" && i > 0 {
				e.Field, msg = msg[:i], msg[i+2:]
			}
			break
		}
	}
	e.Line, e.Msg = at(strings.SplitN(e.Field, "[", 2)[0]), msg
	c.add(&e)
}

// validName checks the characters core allows in policy names, minus the
// '/' that separates a descriptor's domain from its key.
func validName(s string, slash bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:-", c) >= 0 || slash && c == '/') {
			return false
		}
	}
	return true
}

// build validates doc and resolves it into a Set, adding problems to c.
func build(doc *fileDoc, ln *lines, c *collector) *Set {
	if doc.Version != 0 && doc.Version != 1 {
		c.add(&Error{Index: -1, Field: "version", Msg: fmt.Sprintf("version %d is not supported; write version: 1 or leave it out", doc.Version)})
	}
	base := switches{}
	if doc.Defaults != nil {
		at := func(f string) int { return ln.defaults[f] }
		base = resolveSwitches(doc.Defaults, base, Error{Section: "defaults", Index: -1}, at, c)
	}
	if len(doc.Rules) == 0 && len(doc.Descriptors) == 0 {
		c.add(&Error{Index: -1, Msg: "no rules and no descriptors; add a rules: list"})
	}
	s := &Set{}
	names := map[string]string{} // policy name -> where it was defined
	for i := range doc.Rules {
		s.rules = append(s.rules, buildRule(&doc.Rules[i], i, base, ln, names, c))
	}
	checkTies(s.rules, c)
	for i := range doc.Descriptors {
		s.descriptors = append(s.descriptors, buildDescriptor(&doc.Descriptors[i], i, base, ln, names, c))
	}
	s.order = precedenceOrder(s.rules)
	s.index = buildIndex(s.rules, s.order)
	return s
}

// buildRule validates rules[i] and resolves it over the defaults base,
// registering the policy names it defines in names (policy name -> where).
func buildRule(d *ruleDoc, i int, base switches, ln *lines, names map[string]string, c *collector) Rule {
	e := Error{Section: "rules", Index: i, Name: d.Name}
	at, fail := entryReporter(e, ln.rules, c)
	r := Rule{Name: d.Name, Route: d.Route, Index: i, Line: at("")}
	claimRuleName(d.Name, i, names, fail)
	r.Methods = parseMethods(d.Methods, fail)
	var err error
	if r.pat, err = compilePattern(d.Route); err != nil {
		fail("route", err.Error())
	}
	if r.id, err = parseIdentity(d.Identity); err != nil {
		fail("identity", err.Error())
	}
	r.Identity = r.id.String()
	r.Key = resolveKey(d.Key, r.id, fail)
	sw := resolveSwitches(&d.switchesDoc, base, e, at, c)
	r.Algorithm, r.Buckets, r.Shadow, r.SoftPercent, r.CountDenied, r.FailMode =
		sw.algorithm, sw.buckets, sw.shadow, sw.softPercent, sw.countDenied, sw.failMode
	r.Mode, r.Sync, r.FleetSize, r.Elastic = sw.mode, sw.sync, sw.fleetSize, sw.elastic
	resolveConcurrency(d, &r, fail)
	c.cal = ruleCalendar(d, fail)
	switch {
	case len(d.Limits) > 0 || len(d.Tiers) == 0 && d.Concurrency == 0:
		r.Limits = parseLimits(d.Limits, e, at, c)
	case len(d.Tiers) == 0:
		r.Limits, r.concOnly = []core.Limit{concOnlyLimit}, true
	}
	claim := func(field, name string) {
		if where := names[name]; where != "" {
			fail(field, fmt.Sprintf("its policy name %q is already used by %s; rename one", name, where))
			return
		}
		names[name] = fmt.Sprintf("rules[%d] %s", i, field)
	}
	resolvePolicies(d, &r, e, at, c, fail, claim)
	checkRuleCalendar(d, c.cal, fail)
	c.cal = nil
	if !sw.algorithmSet && slices.ContainsFunc(r.Limits, isCalendar) {
		r.Algorithm = core.FixedWindow // calendar periods are fixed windows
	}
	if (len(r.Limits) == len(d.Limits) || len(d.Limits) == 0) && len(r.Limits) > 0 && validName(r.Name, false) {
		r.checkConcurrency(fail)
		p := r.Policy()
		validatePolicy(&p, e, at, c)
		for _, x := range r.extraPolicies() {
			if len(x.Limits) > 0 {
				validatePolicy(&x, e, at, c)
			}
		}
	}
	return r
}

// entryReporter returns, for the entry e of a section whose field lines
// are lines, the line of a field ("" for the entry's own) and the
// function that reports a problem in a field.
func entryReporter(e Error, lines []map[string]int, c *collector) (at func(string) int, fail func(field, msg string)) {
	at = func(f string) int { return lineOf(lines, e.Index, f) }
	fail = func(field, msg string) {
		e := e
		e.Field, e.Line, e.Msg = field, at(field), msg
		c.add(&e)
	}
	return at, fail
}

// claimRuleName checks the name of rules[i] and registers it in names.
func claimRuleName(name string, i int, names map[string]string, fail func(field, msg string)) {
	switch {
	case name == "":
		fail("name", "is empty; give every rule a unique name (it names the policy)")
	case !validName(name, false):
		fail("name", "use 1 to 64 of the characters A-Z a-z 0-9 _ . : -")
	case names[name] != "":
		fail("name", fmt.Sprintf("already used by %s; names must be unique", names[name]))
	default:
		names[name] = fmt.Sprintf("rules[%d]", i)
	}
}

// parseMethods resolves a rule's methods: upper-cased, each once; none
// (or "*" alone) for any method.
func parseMethods(methods []string, fail func(field, msg string)) []string {
	var out []string
	for _, m := range methods {
		switch u := strings.ToUpper(strings.TrimSpace(m)); {
		case u == "*" || u == "ANY":
			if len(methods) != 1 {
				fail("methods", fmt.Sprintf("%q means any method; it cannot be combined with others", m))
			}
		case !slices.Contains(httpMethods, u):
			fail("methods", unknownMethod(m))
		case slices.Contains(out, u):
			fail("methods", fmt.Sprintf("%s is listed twice", u))
		default:
			out = append(out, u)
		}
	}
	return out
}

// resolveKey parses a rule's key, defaulting to the user for an
// authenticated rule and to the IP otherwise, and checks that callers of
// the rule's identity present it.
func resolveKey(text string, id identity, fail func(field, msg string)) Key {
	var k Key
	switch {
	case text != "":
		var err error
		if k, err = parseKey(text); err != nil {
			fail("key", err.Error())
		}
	case id == idAuthenticated:
		k = Key{Kind: keyUser}
	default:
		k = Key{Kind: keyIP}
	}
	if k.Kind == keyUser && id != idAuthenticated {
		fail("key", "key user needs identity: authenticated (anonymous callers have no user); use key: ip, or set identity: authenticated")
	}
	if k.Kind == keyAPIKey && id == idAnonymous {
		fail("key", "anonymous callers present no API key; use key: ip")
	}
	return k
}

// buildDescriptor validates descriptors[i] and resolves it over the
// defaults base, registering its policy name in names.
func buildDescriptor(d *descriptorDoc, i int, base switches, ln *lines, names map[string]string, c *collector) Descriptor {
	e := Error{Section: "descriptors", Index: i, Name: d.Domain + "/" + d.Key}
	at, fail := entryReporter(e, ln.descriptors, c)
	ds := Descriptor{Domain: d.Domain, Key: d.Key, Index: i, Line: at("")}
	okName := true
	for _, f := range []struct{ field, v string }{{"domain", d.Domain}, {"key", d.Key}} {
		if !validName(f.v, false) || len(d.Domain)+len(d.Key) > 63 {
			fail(f.field, "use 1 to 63 of the characters A-Z a-z 0-9 _ . : - (domain and key together)")
			okName = false
		}
	}
	if okName {
		if where := names[ds.Name()]; where != "" {
			fail("key", fmt.Sprintf("%s is already defined by %s", ds.Name(), where))
		}
		names[ds.Name()] = fmt.Sprintf("descriptors[%d]", i)
	}
	ds.Limits = descriptorLimits(d, e, at, c, fail)
	sw := resolveSwitches(&d.switchesDoc, base, e, at, c)
	ds.Algorithm, ds.Buckets, ds.Shadow, ds.SoftPercent, ds.CountDenied, ds.FailMode =
		sw.algorithm, sw.buckets, sw.shadow, sw.softPercent, sw.countDenied, sw.failMode
	ds.Mode, ds.Sync, ds.FleetSize, ds.Elastic = sw.mode, sw.sync, sw.fleetSize, sw.elastic
	if len(ds.Limits) > 0 && okName {
		p := ds.Policy()
		validatePolicy(&p, e, at, c)
	}
	return ds
}

// descriptorLimits resolves a descriptor's limits, written as limits or
// as envoy's unit and requests.
func descriptorLimits(d *descriptorDoc, e Error, at func(string) int, c *collector, fail func(field, msg string)) []core.Limit {
	switch {
	case len(d.Limits) > 0 && (d.Unit != "" || d.Requests != 0):
		fail("limits", "write either unit and requests, or limits, not both")
	case len(d.Limits) > 0:
		return parseLimits(d.Limits, e, at, c)
	case d.Unit == "" || d.Requests <= 0:
		fail("requests", "write unit (second, minute, hour, day) and requests (> 0), e.g. unit: minute, requests: 10")
	default:
		w, err := parseWindow(strings.TrimSpace(d.Unit))
		if err != nil {
			fail("unit", err.Error())
		} else {
			return []core.Limit{{Requests: d.Requests, Window: w}}
		}
	}
	return nil
}

// precedenceOrder lists the indexes of rules most specific first, file
// order breaking ties.
func precedenceOrder(rules []Rule) []int {
	order := make([]int, len(rules))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		if precedes(&rules[i], &rules[j]) {
			return -1
		}
		if precedes(&rules[j], &rules[i]) {
			return 1
		}
		return 0
	})
	return order
}

// httpMethods are the methods a rule may list: RFC 9110's and PATCH
// (RFC 5789). Extension methods (WebDAV's PROPFIND, ...) are not accepted:
// a misspelt standard method ("GTE") would otherwise load as a rule that
// never matches. A rule for every method leaves methods out.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// unknownMethod says a method is not one of httpMethods and suggests the
// closest.
func unknownMethod(m string) string {
	msg := fmt.Sprintf("%q is not an HTTP method", m)
	best, bestD := "", 3
	for _, k := range httpMethods {
		if d := editDistance(strings.ToUpper(strings.TrimSpace(m)), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg + "; use " + strings.Join(httpMethods, ", ") + `, or leave methods out (or write [*]) for any method`
}

// tieKey is what two rules must share to tie on every precedence
// criterion for some request: identity, route up to parameter names, and
// a method both match ("" for a rule without methods; a rule with methods
// never ties with one without, which it precedes).
type tieKey struct {
	identity identity
	route    string
	method   string
}

// checkTies rejects a rule that ties with an earlier one on every
// precedence criterion for some request: file order would decide, so the
// later rule would never apply. It hashes each rule under every method it
// matches, so it runs in time linear in the number of rules and methods.
func checkTies(rules []Rule, c *collector) {
	first := make(map[tieKey]int, len(rules))
	for j := range rules {
		b := &rules[j]
		route := canonical(b.Route)
		methods := b.Methods
		if len(methods) == 0 {
			methods = []string{""}
		} else if slices.Contains(methods, "GET") && !slices.Contains(methods, "HEAD") {
			methods = append(slices.Clone(methods), "HEAD") // GET also matches HEAD
		}
		tie := -1
		for _, m := range methods {
			k := tieKey{b.id, route, m}
			if i, ok := first[k]; ok {
				if tie < 0 || i < tie {
					tie = i
				}
			} else {
				first[k] = j
			}
		}
		if tie >= 0 {
			a := &rules[tie]
			c.add(&Error{Section: "rules", Index: j, Name: b.Name, Line: b.Line, Msg: fmt.Sprintf(
				"matches the same requests as rules[%d] %q (same route, methods and identity), which comes first, so it would never apply; merge or remove one", tie, a.Name)})
		}
	}
}

// precedes reports whether a is more specific than b, ignoring file order.
func precedes(a, b *Rule) bool {
	if more, decided := moreSpecific(&a.pat, &b.pat); decided {
		return more
	}
	if (len(a.Methods) > 0) != (len(b.Methods) > 0) {
		return len(a.Methods) > 0
	}
	if (a.id != idAny) != (b.id != idAny) {
		return a.id != idAny
	}
	return false
}

// canonical is a route with parameter names erased, so that /u/{id} and
// /u/:x compare equal.
func canonical(route string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") || strings.HasPrefix(p, ":") {
			parts[i] = "{}"
		}
	}
	return strings.Join(parts, "/")
}

// ---- encoding ----

func (s *Set) doc() *fileDoc {
	doc := &fileDoc{Version: 1, Rules: []ruleDoc{}} // "rules": [], not null
	sw := func(a core.Algorithm, buckets int, shadow bool, soft int, count bool, fm core.FailMode, mode core.Mode, sync time.Duration, fleet int) switchesDoc {
		var out switchesDoc
		alg := a.String()
		out.Algorithm = &alg
		if buckets != 0 {
			out.Buckets = &buckets
		}
		if shadow {
			out.Shadow = &shadow
		}
		if soft != 0 {
			out.SoftPercent = &soft
		}
		if count {
			out.CountDenied = &count
		}
		if fm != core.FailOpen {
			m := fm.String()
			out.FailMode = &m
		}
		if mode != core.ModeDefault {
			m := mode.String()
			out.Mode = &m
		}
		if sync != 0 {
			d := sync.String()
			out.Sync = &d
		}
		if fleet != 0 {
			out.FleetSize = &fleet
		}
		return out
	}
	limits := func(ls []core.Limit) []limitDoc {
		out := make([]limitDoc, len(ls))
		for i, l := range ls {
			out[i].text = l.String()
		}
		return out
	}
	for i := range s.rules {
		r := &s.rules[i]
		d := ruleDoc{Name: r.Name, Methods: r.Methods, Route: r.Route, Identity: r.Identity, Key: r.Key.String(), Limits: limits(r.Limits),
			switchesDoc: sw(r.Algorithm, r.Buckets, r.Shadow, r.SoftPercent, r.CountDenied, r.FailMode, r.Mode, r.Sync, r.FleetSize)}
		d.Elastic = r.Elastic.doc()
		d.policiesDoc = r.policiesDoc()
		r.concurrencyDoc(&d)
		doc.Rules = append(doc.Rules, d)
	}
	for i := range s.descriptors {
		ds := &s.descriptors[i]
		dd := descriptorDoc{Domain: ds.Domain, Key: ds.Key, Limits: limits(ds.Limits),
			switchesDoc: sw(ds.Algorithm, ds.Buckets, ds.Shadow, ds.SoftPercent, ds.CountDenied, ds.FailMode, ds.Mode, ds.Sync, ds.FleetSize)}
		dd.Elastic = ds.Elastic.doc()
		doc.Descriptors = append(doc.Descriptors, dd)
	}
	return doc
}

// encodeYAML writes the set as a YAML rules file with every default
// spelled out and limits in the short form; [Parse] reads it back to an
// equal set.
func (s *Set) encodeYAML() ([]byte, error) { return yaml.Marshal(s.doc()) }

// encodeJSON writes the set as an indented JSON rules file; [Parse] reads
// it back to an equal set.
func (s *Set) encodeJSON() ([]byte, error) { return json.MarshalIndent(s.doc(), "", "  ") }
