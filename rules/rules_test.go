package rules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

func mustParse(t *testing.T, src string) *Set {
	t.Helper()
	s, err := parse([]byte(src), syntaxYAML)
	require.NoError(t, err)
	return s
}

// TestDefaultIsTheDesignTable guards the embedded example: it must be the
// design notes' endpoint table, limit for limit.
func TestDefaultIsTheDesignTable(t *testing.T) {
	s := Default()
	want := []struct {
		name, method, route string
		identity            string
		key                 string
		per15m, per1m       int64
	}{
		{"api1-get", "GET", "/api1", "authenticated", "user", 900, 200},
		{"api2-get", "GET", "/api2", "authenticated", "user", 900, 200},
		{"api2-post", "POST", "/api2", "authenticated", "user", 500, 100},
		{"api3-get", "GET", "/api3", "authenticated", "user", 800, 150},
		{"anonymous-get", "GET", "/*", "anonymous", "ip", 250, 50},
	}
	rs := s.Rules()
	require.Len(t, rs, len(want)+3) // and issue 26's login and plans rules, issue 36's exports
	for i, w := range want {
		r := rs[i]
		assert.Equal(t, w.name, r.Name)
		assert.Equal(t, []string{w.method}, r.Methods)
		assert.Equal(t, w.route, r.Route)
		assert.Equal(t, w.identity, r.Identity)
		assert.Equal(t, w.key, r.Key.String())
		assert.Equal(t, []core.Limit{core.Per(w.per15m, 15*time.Minute), core.PerMinute(w.per1m)}, r.Limits)
		p := r.Policy()
		require.NoError(t, p.Validate())
		assert.Equal(t, w.name, p.Name)
	}
	d, ok := s.Descriptor("auth", "login")
	require.True(t, ok)
	assert.Equal(t, "auth/login", d.Policy().Name)
	assert.Equal(t, []core.Limit{core.PerMinute(10)}, d.Limits)
	assert.True(t, d.CountDenied)
	assert.Equal(t, core.FailClosed, d.FailMode)
	d, ok = s.Descriptor("messaging", "email")
	require.True(t, ok)
	assert.Equal(t, []core.Limit{core.PerDay(5)}, d.Limits)
	_, ok = s.Descriptor("auth", "nope")
	assert.False(t, ok)
	assert.Len(t, s.Policies(), 15) // 8 rules, 2 descriptors, login-ip, 3 plans and an override
	assert.Equal(t, defaultFile(), defaultYAML)
}

func TestDefaultMatch(t *testing.T) {
	s := Default()
	tests := []struct {
		method, path string
		auth         bool
		want         string // "" = no rule
	}{
		{"GET", "/api1", true, "api1-get"},
		{"HEAD", "/api1", true, "api1-get"},
		{"GET", "/api2", true, "api2-get"},
		{"POST", "/api2", true, "api2-post"},
		{"GET", "/api3", true, "api3-get"},
		{"DELETE", "/api2", true, ""},
		{"GET", "/other", true, ""},
		{"GET", "/api1", false, "anonymous-get"},
		{"GET", "/", false, "anonymous-get"},
		{"GET", "/anything/deep/below", false, "anonymous-get"},
		{"HEAD", "/x", false, "anonymous-get"},
		{"POST", "/api2", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := s.Match(tt.method, tt.path, tt.auth)
			if tt.want == "" {
				assert.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			assert.Equal(t, tt.want, r.Name)
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		route string
		yes   []string
		no    []string
	}{
		{"/api1", []string{"/api1"}, []string{"/api1/", "/api", "/api12", "api1", "", "/API1", "/api1/x"}},
		{"/", []string{"/"}, []string{"/x", ""}},
		{"/api/", []string{"/api/"}, []string{"/api", "/api/x"}},
		{"/api/*", []string{"/api/", "/api/x", "/api/x/y"}, []string{"/api", "/apix", "/apix/y", "/"}},
		{"/*", []string{"/", "/x", "/x/y/z", "//"}, []string{"", "x"}},
		{"/users/{id}", []string{"/users/7", "/users/:id"}, []string{"/users", "/users/", "/users/7/x"}},
		{"/users/:id/posts", []string{"/users/7/posts"}, []string{"/users//posts", "/users/7/post", "/users/7/posts/"}},
		{"/a/{x}/*", []string{"/a/b/", "/a/b/c"}, []string{"/a/b", "/a//c"}},
	}
	for _, tt := range tests {
		t.Run(tt.route, func(t *testing.T) {
			p, err := compilePattern(tt.route)
			require.NoError(t, err)
			for _, y := range tt.yes {
				assert.True(t, p.match(y), "%s should match %q", tt.route, y)
			}
			for _, n := range tt.no {
				assert.False(t, p.match(n), "%s should not match %q", tt.route, n)
			}
		})
	}
}

// TestPrecedence is the package doc's precedence list, one row per rule.
func TestPrecedence(t *testing.T) {
	const src = `
rules:
  - {name: catch-all,       route: "/*",                limits: ["1 per 1s"]}
  - {name: catch-all-get,   route: "/*", methods: [GET], limits: ["1 per 1s"]}
  - {name: api-any,         route: "/api/*",            limits: ["1 per 1s"]}
  - {name: api-v1,          route: "/api/v1/*",         limits: ["1 per 1s"]}
  - {name: api-v1-param,    route: "/api/v1/{x}",       limits: ["1 per 1s"]}
  - {name: api-v1-exact,    route: "/api/v1/status",    limits: ["1 per 1s"]}
  - {name: params,          route: "/{a}/{b}/{c}",      limits: ["1 per 1s"]}
  - {name: users-star,      route: "/users/*",          limits: ["1 per 1s"]}
  - {name: users-id,        route: "/users/{id}",       limits: ["1 per 1s"]}
  - {name: users-me,        route: "/users/me",         limits: ["1 per 1s"]}
  - {name: login-any,       route: "/login",            limits: ["1 per 1s"]}
  - {name: login-anon,      route: "/login", identity: anonymous, limits: ["1 per 1s"]}
  - {name: login-post,      route: "/login", methods: [POST], limits: ["1 per 1s"]}
  - {name: login-post-anon, route: "/login", methods: [POST], identity: anonymous, limits: ["1 per 1s"]}
  - {name: tie-first,       route: "/tie/{a}",          limits: ["1 per 1s"]}
  - {name: tie-second,      route: "/tie/*",  methods: [PUT], limits: ["1 per 1s"]}
  - {name: tenant-star,     route: "/{tenant}/*",       limits: ["1 per 1s"]}
  - {name: v1-star,         route: "/v1/*",             limits: ["1 per 1s"]}
  - {name: v1-id-star,      route: "/v1/{id}/*",        limits: ["1 per 1s"]}
  - {name: order-first,     route: "/o/*",   methods: [GET], limits: ["1 per 1s"]}
  - {name: order-second,    route: "/o/*",   methods: [GET, POST], identity: any, key: ip, limits: ["1 per 1s"], algorithm: token_bucket}
`
	// order-second overlaps order-first on GET, which is a load error; drop
	// GET from it to leave a pure file-order tie only where allowed.
	s, err := parse([]byte(src), syntaxYAML)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `rules[20] "order-second": matches the same requests as rules[19] "order-first"`)
	s = mustParse(t, strings.Replace(src, "methods: [GET, POST], identity: any", "methods: [POST], identity: any", 1)+
		`  - {name: file-a, route: "/f/{a}", methods: [GET], limits: ["1 per 1s"]}
  - {name: file-b, route: "/f/:b",  methods: [PUT], limits: ["1 per 1s"]}
  - {name: file-c, route: "/f/{c}", methods: [PUT, GET], identity: authenticated, limits: ["1 per 1s"]}
`)

	tests := []struct {
		method, path string
		auth         bool
		want, why    string
	}{
		{"PUT", "/x", false, "catch-all", "only /* matches"},
		{"GET", "/x", false, "catch-all-get", "explicit method beats any"},
		{"PUT", "/api/x", false, "api-any", "literal prefix beats /*"},
		{"PUT", "/api/v1/a/b", false, "api-v1", "longer literal prefix beats shorter"},
		{"PUT", "/api/v1/a", false, "api-v1-param", "same literals, no trailing wildcard wins"},
		{"PUT", "/api/v1/status", false, "api-v1-exact", "fully literal beats everything"},
		{"PUT", "/x/y/z", false, "params", "parameters beat /*"},
		{"PUT", "/users/7", false, "users-id", "parameter beats trailing wildcard"},
		{"PUT", "/users/7/x", false, "users-star", "only the wildcard matches"},
		{"PUT", "/users/me", false, "users-me", "literal beats parameter"},
		{"GET", "/login", true, "login-any", "route first: /login beats /* GET"},
		{"GET", "/login", false, "login-anon", "explicit identity beats any"},
		{"POST", "/login", true, "login-post", "explicit method beats any method"},
		{"POST", "/login", false, "login-post-anon", "method and identity both explicit"},
		{"PUT", "/tie/a", false, "tie-first", "route specificity before method"},
		{"PUT", "/acme/x", false, "tenant-star", "more parameter segments beat /*"},
		{"PUT", "/v1/7/x", false, "v1-id-star", "same literals and wildcard: more parameter segments win"},
		{"PUT", "/v1/x", false, "v1-star", "only the shorter wildcard matches"},
		{"GET", "/o/x", false, "order-first", ""},
		{"POST", "/o/x", false, "order-second", ""},
		{"GET", "/f/x", true, "file-c", "explicit identity breaks the method tie"},
		{"GET", "/f/x", false, "file-a", "file order breaks the remaining tie"},
		{"PUT", "/f/x", false, "file-b", ""},
		{"PUT", "/f/x", true, "file-c", "explicit identity"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path+" "+tt.want, func(t *testing.T) {
			r := s.Match(tt.method, tt.path, tt.auth)
			require.NotNil(t, r)
			assert.Equal(t, tt.want, r.Name, tt.why)
		})
	}
	// The result does not depend on the order the rules were written in,
	// except for genuine file-order ties.
	rs := s.Rules()
	for i := range rs {
		for j := range rs {
			if i != j && precedes(&rs[i], &rs[j]) {
				assert.False(t, precedes(&rs[j], &rs[i]), "%s and %s precede each other", rs[i].Name, rs[j].Name)
			}
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	s := Default()
	allocs := testing.AllocsPerRun(100, func() {
		_ = s.Match("GET", "/some/deep/path", false)
		_ = s.Match("POST", "/api2", true)
	})
	assert.Zero(t, allocs)
}

func TestRuleDefaultsAndSwitches(t *testing.T) {
	s := mustParse(t, `
defaults:
  algorithm: sliding_counter
  buckets: 10
  fail_mode: closed
  shadow: true
rules:
  - name: a
    route: /a
    limits: ["10 per 1m"]
  - name: b
    route: /b
    identity: authenticated
    algorithm: gcra
    shadow: false
    soft_percent: 20
    count_denied: true
    fail_mode: open
    limits: [{requests: 10, window: 1m, burst: 15}, {requests: 100, window: hour}]
  - name: c
    route: /c
    key: "header:x-tenant-id"
    limits: ["10 per 1s burst 10"]
    algorithm: token_bucket
`)
	a, ok := s.Rule("a")
	require.True(t, ok)
	assert.Equal(t, core.SlidingWindowCounter, a.Algorithm)
	assert.Equal(t, 10, a.Buckets)
	assert.Equal(t, core.FailClosed, a.FailMode)
	assert.True(t, a.Shadow)
	assert.Equal(t, "any", a.Identity)
	assert.Equal(t, Key{Kind: "ip"}, a.Key)
	assert.Empty(t, a.Methods)

	b, _ := s.Rule("b")
	assert.Equal(t, core.GCRA, b.Algorithm)
	assert.Zero(t, b.Buckets, "a default bucket count applies to sliding_counter only")
	assert.False(t, b.Shadow)
	assert.Equal(t, 20, b.SoftPercent)
	assert.True(t, b.CountDenied)
	assert.Equal(t, core.FailOpen, b.FailMode)
	assert.Equal(t, Key{Kind: "user"}, b.Key, "authenticated rules default to the user key")
	assert.Equal(t, []core.Limit{core.PerMinute(10).WithBurst(15), core.PerHour(100)}, b.Limits)
	p := b.Policy()
	assert.Equal(t, core.Policy{Name: "b", Algorithm: core.GCRA, Limits: b.Limits, SoftPercent: 20, CountDenied: true}, p)

	c, _ := s.Rule("c")
	assert.Equal(t, Key{Kind: "header", Header: "X-Tenant-Id"}, c.Key)
	assert.Equal(t, "header:X-Tenant-Id", c.Key.String())
	assert.Equal(t, []core.Limit{core.PerSecond(10)}, c.Limits, "burst equal to requests is normalized to 0")
}

func TestParseErrorsYAML(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error
	}{
		{"unknown top-level field", "rule:\n  - name: a\n", []string{`line 1: unknown field "rule" (did you mean "rules"?)`}},
		{"unknown rule field", "rules:\n  - name: a\n    route: /a\n    metods: [GET]\n    limits: [1 per 1s]\n",
			[]string{`line 4: rules[0] "a": unknown field "metods" (did you mean "methods"?); known fields: name, methods`}},
		{"unknown structured limit field", "rules:\n  - name: a\n    route: /a\n    limits:\n      - {requests: 1, windw: 1s}\n",
			[]string{`line 5: rules[0] "a": limits[0]: unknown field "windw" (did you mean "window"?)`}},
		{"unknown defaults field", "defaults:\n  algoritm: gcra\nrules: []\n", []string{`line 2: defaults: unknown field "algoritm"`}},
		{"unknown descriptor field", "descriptors:\n  - {domain: a, key: b, unit: minute, requests: 1, reqs: 2}\n",
			[]string{`line 2: descriptors[0] "a/b": unknown field "reqs"`}},
		{"wrong type", "rules:\n  - name: a\n    route: /a\n    limits: [1 per 1s]\n    buckets: many\n",
			[]string{"line 5: rules[0] \"a\": buckets: cannot unmarshal !!str `many` into int"}},
		{"wrong type in second rule", "rules:\n  - name: a\n    route: /a\n    limits: [1 per 1s]\n  - name: b\n    route: /b\n    limits: [1 per 1s]\n    shadow: maybe\n",
			[]string{`line 8: rules[1] "b": shadow: cannot unmarshal`}},
		{"limit is a list", "rules:\n  - name: a\n    route: /a\n    limits: [[1, 2]]\n", []string{`line 4: rules[0] "a": limits: a limit is a string`}},
		{"syntax error", "rules:\n  - name: a\n   route: /a\n", []string{"rules: line 1: did not find expected"}},
		{"not a mapping", "- a\n- b\n", []string{"line 1: the file must be a mapping with a rules: list"}},
		{"rules not a list", "rules: {name: a}\n", []string{`rules: must be a list`}},
		{"empty", "", []string{"empty file"}},
		{"nothing", "version: 1\n", []string{"no rules and no descriptors"}},
		{"bad version", "version: 2\nrules: [{name: a, route: /a, limits: [1 per 1s]}]\n", []string{"version 2 is not supported"}},
		{"missing name", "rules:\n  - route: /a\n    limits: [1 per 1s]\n", []string{`line 2: rules[0]: name: is empty`}},
		{"bad name", "rules:\n  - name: a b\n    route: /a\n    limits: [1 per 1s]\n", []string{`line 2: rules[0] "a b": name: use 1 to 64`}},
		{"slash in name", "rules:\n  - name: a/b\n    route: /a\n    limits: [1 per 1s]\n", []string{`name: use 1 to 64`}},
		{"duplicate name", "rules:\n  - {name: a, route: /a, limits: [1 per 1s]}\n  - {name: a, route: /b, limits: [1 per 1s]}\n",
			[]string{`line 3: rules[1] "a": name: already used by rules[0]`}},
		{"route missing", "rules:\n  - name: a\n    limits: [1 per 1s]\n", []string{`rules[0] "a": route: is empty`}},
		{"route relative", "rules:\n  - name: a\n    route: api\n    limits: [1 per 1s]\n", []string{`line 3: rules[0] "a": route: must start with "/"`}},
		{"route inner wildcard", "rules:\n  - name: a\n    route: /a/*/b\n    limits: [1 per 1s]\n", []string{`route: a wildcard is allowed only as the last segment`}},
		{"route star suffix", "rules:\n  - name: a\n    route: /api*\n    limits: [1 per 1s]\n", []string{`route: a wildcard is allowed only as the last segment`}},
		{"route empty segment", "rules:\n  - name: a\n    route: /a//b\n    limits: [1 per 1s]\n", []string{`route: has an empty segment`}},
		{"route unclosed param", "rules:\n  - name: a\n    route: /a/{id\n    limits: [1 per 1s]\n", []string{`route: segment {id is not closed`}},
		{"route mixed param", "rules:\n  - name: a\n    route: /a/x{id}\n    limits: [1 per 1s]\n", []string{`route: segment x{id} mixes text`}},
		{"route empty param", "rules:\n  - name: a\n    route: /a/{}\n    limits: [1 per 1s]\n", []string{`route: segment {} is not a parameter`}},
		{"bad method", "rules:\n  - name: a\n    route: /a\n    methods: [GET, \"P O\"]\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": methods: "P O" is not an HTTP method`}},
		{"duplicate method", "rules:\n  - name: a\n    route: /a\n    methods: [GET, get]\n    limits: [1 per 1s]\n", []string{`methods: GET is listed twice`}},
		{"any mixed", "rules:\n  - name: a\n    route: /a\n    methods: [\"*\", GET]\n    limits: [1 per 1s]\n", []string{`methods: "*" means any method`}},
		{"bad identity", "rules:\n  - name: a\n    route: /a\n    identity: admin\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": identity: unknown identity "admin"`}},
		{"bad key", "rules:\n  - name: a\n    route: /a\n    key: cookie\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": key: unknown key "cookie"`}},
		{"bad header key", "rules:\n  - name: a\n    route: /a\n    key: \"header:x y\"\n    limits: [1 per 1s]\n", []string{`is not a valid header name`}},
		{"user key for anyone", "rules:\n  - name: a\n    route: /a\n    key: user\n    limits: [1 per 1s]\n", []string{`key: key user needs identity: authenticated`}},
		{"api key for anonymous", "rules:\n  - name: a\n    route: /a\n    identity: anonymous\n    key: api_key\n    limits: [1 per 1s]\n", []string{`key: anonymous callers present no API key`}},
		{"no limits", "rules:\n  - name: a\n    route: /a\n", []string{`rules[0] "a": limits: no limits`}},
		{"bad limit", "rules:\n  - name: a\n    route: /a\n    limits:\n      - 10 per 1m\n      - 10 every 1m\n", []string{`line 6: rules[0] "a": limits[1]: limit "10 every 1m": want`}},
		{"bad structured limit", "rules:\n  - name: a\n    route: /a\n    limits: [{requests: 0, window: 1m}]\n", []string{`limits[0]: requests: 0 is not a positive`}},
		{"bad structured window", "rules:\n  - name: a\n    route: /a\n    limits: [{requests: 1, window: soon}]\n", []string{`limits[0]: window: "soon" is not a positive duration`}},
		{"bad algorithm", "rules:\n  - name: a\n    route: /a\n    algorithm: leaky\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": algorithm: unknown algorithm "leaky"`}},
		{"bad fail mode", "rules:\n  - name: a\n    route: /a\n    fail_mode: ajar\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": fail_mode: unknown fail mode "ajar"`}},
		{"core: burst on window algorithm", "rules:\n  - name: a\n    route: /a\n    algorithm: fixed_window\n    limits: [10 per 1s burst 20]\n",
			[]string{`line 5: rules[0] "a": limits[0]: burst applies to token bucket and GCRA only`}},
		{"core: buckets on gcra", "rules:\n  - name: a\n    route: /a\n    buckets: 4\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": buckets: buckets applies to sliding_counter only`}},
		{"core: soft percent", "rules:\n  - name: a\n    route: /a\n    soft_percent: 5000\n    limits: [1 per 1s]\n", []string{`line 4: rules[0] "a": soft_percent: soft_percent must be in [0, 1000]`}},
		{"core: too many limits", "rules:\n  - name: a\n    route: /a\n    limits: [1/s, 2/s, 3/s, 4/s, 5/s, 6/s, 7/s, 8/s, 9/s]\n", []string{`line 4: rules[0] "a": limits: 9 limits, at most 8`}},
		{"duplicate rule", "rules:\n  - {name: a, route: \"/a/{x}\", methods: [GET], limits: [1/s]}\n  - {name: b, route: \"/a/:y\", methods: [HEAD], limits: [1/s]}\n",
			[]string{`line 3: rules[1] "b": matches the same requests as rules[0] "a"`}},
		{"duplicate any-method rule", "rules:\n  - {name: a, route: /a, limits: [1/s]}\n  - {name: b, route: /a, limits: [1/s]}\n",
			[]string{`rules[1] "b": matches the same requests as rules[0] "a"`}},
		{"descriptor without limits", "descriptors:\n  - domain: auth\n    key: login\n", []string{`line 2: descriptors[0] "auth/login": requests: write unit`}},
		{"descriptor both forms", "descriptors:\n  - {domain: auth, key: login, unit: minute, requests: 1, limits: [1/s]}\n", []string{`limits: write either unit and requests, or limits`}},
		{"descriptor bad unit", "descriptors:\n  - domain: auth\n    key: login\n    unit: fortnight\n    requests: 3\n", []string{`line 4: descriptors[0] "auth/login": unit: window: "fortnight"`}},
		{"descriptor bad domain", "descriptors:\n  - {domain: a/b, key: c, unit: minute, requests: 1}\n", []string{`descriptors[0] "a/b/c": domain: use 1 to 63`}},
		{"descriptor duplicate", "descriptors:\n  - {domain: a, key: b, unit: minute, requests: 1}\n  - {domain: a, key: b, unit: hour, requests: 1}\n", []string{`line 3: descriptors[1] "a/b": key: a/b is already defined by descriptors[0]`}},
		{"several problems at once", "rules:\n  - name: a\n    route: a\n    limits: [x]\n  - name: b\n    route: /b\n    identity: who\n    limits: [1/s]\n",
			[]string{`line 3: rules[0] "a": route: must start`, `line 4: rules[0] "a": limits[0]: requests: "x"`, `line 7: rules[1] "b": identity: unknown identity "who"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parse([]byte(tt.src), syntaxYAML)
			require.Error(t, err)
			assert.Nil(t, s)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			var e *Error
			assert.True(t, errors.As(err, &e), "errors are *rules.Error")
		})
	}
}

func TestParseErrorsJSON(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown rule field", "{\"rules\": [\n  {\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"]},\n  {\"name\": \"b\", \"rote\": \"/b\"}\n]}",
			[]string{`line 3: rules[1] "b": unknown field "rote" (did you mean "route"?)`}},
		{"unknown top field", "{\n \"rulez\": []}", []string{`line 2: unknown field "rulez" (did you mean "rules"?)`}},
		{"unknown limit field", "{\"rules\": [\n  {\"name\": \"a\", \"route\": \"/a\", \"limits\": [{\"requests\": 1, \"windw\": \"1s\"}]}]}",
			[]string{`line 2: rules[0] "a": limits[0]: unknown field "windw" (did you mean "window"?)`}},
		{"wrong type", "{\"rules\": [\n  {\"name\": \"a\", \"route\": \"/a\", \"buckets\": \"x\", \"limits\": [\"1/s\"]}]}",
			[]string{`line 2: rules[0] "a": buckets: a JSON string is not a valid int`}},
		{"syntax", "{\"rules\": [\n  {\"name\": \"a\",, }]}", []string{"line 2:", "byte offset"}},
		{"not an object", "[1]", []string{`must be an object with a "rules" list`}},
		{"trailing data", "{\"rules\": [{\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"]}]}\n{}", []string{"line 2: unexpected data after the top-level object"}},
		{"validation with line", "{\"rules\": [\n  {\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"]},\n\n  {\"name\": \"b\", \"route\": \"b\", \"limits\": [\"1/s\"]}]}",
			[]string{`line 4: rules[1] "b": route: must start with "/"`}},
		{"defaults unknown", "{\"defaults\": {\"algo\": \"gcra\"}, \"rules\": []}", []string{`defaults: unknown field "algo"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.src), syntaxJSON)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestTooManyErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for range 50 {
		b.WriteString("  - {name: \"\", route: x, limits: [y]}\n")
	}
	_, err := parse([]byte(b.String()), syntaxYAML)
	require.Error(t, err)
	assert.Equal(t, maxErrors, strings.Count(err.Error(), "\n")+1)
}

func TestRoundTrip(t *testing.T) {
	src := string(defaultFile()) + `
  - domain: x
    key: y
    algorithm: sliding_counter
    buckets: 6
    shadow: true
    soft_percent: 10
    limits: ["6 per 1m", {requests: 60, window: 1h}]
`
	orig := mustParse(t, src)
	strip := func(s *Set) ([]Rule, []Descriptor) {
		rs, ds := s.Rules(), append([]Descriptor(nil), s.descriptors...)
		for i := range rs {
			rs[i].Line = 0
		}
		for i := range ds {
			ds[i].Line = 0
		}
		return rs, ds
	}
	wantR, wantD := strip(orig)
	for _, f := range []syntax{syntaxYAML, syntaxJSON} {
		t.Run(f.String(), func(t *testing.T) {
			var data []byte
			var err error
			if f == syntaxJSON {
				data, err = orig.encodeJSON()
			} else {
				data, err = orig.encodeYAML()
			}
			require.NoError(t, err)
			back, err := parse(data, f)
			require.NoError(t, err, string(data))
			gotR, gotD := strip(back)
			assert.Equal(t, wantR, gotR)
			assert.Equal(t, wantD, gotD)
			assert.Equal(t, orig.order, back.order)
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	js, err := Default().encodeJSON()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.json"), js, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.yaml"), defaultFile(), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.yml"), []byte("rules:\n  - name: a\n    route: a\n    limits: [1/s]\n"), 0o600))
	for _, name := range []string{"r.json", "r.yaml"} {
		s, err := LoadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Len(t, s.Rules(), 8)
	}
	_, err = LoadFile(filepath.Join(dir, "bad.yml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.yml: rules: line 3:")
	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	big := make([]byte, maxFileSize+1)
	_, err = parse(big, syntaxYAML)
	assert.ErrorContains(t, err, "larger than")
}

func TestTextForms(t *testing.T) {
	for _, s := range []string{"any", "authenticated", "anonymous"} {
		id, err := parseIdentity(s)
		require.NoError(t, err)
		assert.Equal(t, s, id.String())
	}
	id, err := parseIdentity("")
	require.NoError(t, err)
	assert.Equal(t, idAny, id)
	assert.Equal(t, "identity(9)", identity(9).String())
	for in, want := range map[string]string{"ip": "ip", "USER": "user", "api-key": "api_key", "apikey": "api_key", "header:x-api-tenant": "header:X-Api-Tenant"} {
		k, err := parseKey(in)
		require.NoError(t, err)
		assert.Equal(t, want, k.String())
	}
	assert.Equal(t, "ip", Key{}.String(), "the zero Key counts by IP")
	assert.Equal(t, "json", syntaxJSON.String())
	assert.Equal(t, "yaml", syntaxYAML.String())
}

func BenchmarkMatch(b *testing.B) {
	s := Default()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Match("GET", "/api3", true)
			_ = s.Match("GET", "/some/other/path", false)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = s.Match("GET", "/api3", true)
			}
		})
	})
}
