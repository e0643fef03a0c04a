package rules

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/core"
)

// TestJSONDuplicateKeys guards against encoding/json's silent last-wins on
// a repeated key: it is an error at every level, naming the key and both
// lines.
func TestJSONDuplicateKeys(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"top level", "{\"rules\": [{\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"]}],\n\"rules\": []}",
			`line 2: key "rules" appears twice (first on line 1)`},
		{"rule field", "{\"rules\": [\n {\"name\": \"a\", \"route\": \"/a\",\n  \"limits\": [\"1/s\"],\n  \"limits\": [\"100/s\"]}]}",
			`line 4: rules[0] "a": key "limits" appears twice (first on line 3)`},
		{"descriptor field", "{\"descriptors\": [\n {\"domain\": \"a\", \"key\": \"b\", \"unit\": \"minute\",\n  \"requests\": 1, \"requests\": 1000}]}",
			`line 3: descriptors[0] "a/b": key "requests" appears twice (first on line 3)`},
		{"structured limit", "{\"rules\": [{\"name\": \"a\", \"route\": \"/a\", \"limits\": [\n  {\"requests\": 1, \"window\": \"1s\",\n   \"window\": \"1h\"}]}]}",
			`line 3: rules[0] "a": limits[0]: key "window" appears twice (first on line 2)`},
		{"defaults", "{\"defaults\": {\"shadow\": true,\n \"shadow\": false}, \"rules\": [{\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"]}]}",
			`line 2: defaults: key "shadow" appears twice (first on line 1)`},
		{"inside an unknown field", "{\"rules\": [{\"name\": \"a\", \"route\": \"/a\", \"limits\": [\"1/s\"],\n \"x\": {\"y\": 1, \"y\": 2}}]}",
			`key "y" appears twice in rules[0].x (first on line 2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parse([]byte(tt.src), syntaxJSON)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestYAMLDuplicateKeys pins that syntaxYAML, too, rejects a repeated key.
func TestYAMLDuplicateKeys(t *testing.T) {
	_, err := parse([]byte("rules:\n  - name: a\n    route: /a\n    limits: [1/s]\n    limits: [100/s]\n"), syntaxYAML)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `line 5: rules[0]`)
	assert.Contains(t, err.Error(), `mapping key "limits" already defined at line 4`)
}

// TestUnknownDefaultsFieldDoesNotStopCollection guards against a problem
// hiding the others: an unknown field (in defaults or anywhere) is
// reported together with every other problem of the file.
func TestUnknownDefaultsFieldDoesNotStopCollection(t *testing.T) {
	yamlSrc := `defaults:
  algoritm: gcra
rules:
  - name: a
    route: a
    methods: [GTE]
    limits: ["1 per 213504d"]
  - name: b
    route: /b
    limits: [1/s]
    shadw: true
descriptors:
  - {domain: auth, key: login, unit: fortnight, requests: 3}
`
	jsonSrc := `{"defaults": {"algoritm": "gcra"},
"rules": [
 {"name": "a",
  "route": "a",
  "methods": ["GTE"],
  "limits": ["1 per 213504d"]},
 {"name": "b", "route": "/b", "limits": ["1/s"],
  "shadw": true}],
"descriptors": [
 {"domain": "auth", "key": "login", "unit": "fortnight", "requests": 3}]}`
	for _, tt := range []struct {
		format syntax
		src    string
		want   []string
	}{
		{syntaxYAML, yamlSrc, []string{
			`line 2: defaults: unknown field "algoritm" (did you mean "algorithm"?)`,
			`line 5: rules[0] "a": route: must start with "/"`,
			`line 6: rules[0] "a": methods: "GTE" is not an HTTP method (did you mean "GET"?)`,
			`line 7: rules[0] "a": limits[0]: limit "1 per 213504d": window: "213504d" is longer than 366 days`,
			`line 11: rules[1] "b": unknown field "shadw" (did you mean "shadow"?)`,
			`line 13: descriptors[0] "auth/login": unit: window: "fortnight"`,
		}},
		{syntaxJSON, jsonSrc, []string{
			`line 1: defaults: unknown field "algoritm" (did you mean "algorithm"?)`,
			`line 4: rules[0] "a": route: must start with "/"`,
			`line 5: rules[0] "a": methods: "GTE" is not an HTTP method (did you mean "GET"?)`,
			`line 6: rules[0] "a": limits[0]: limit "1 per 213504d": window: "213504d" is longer than 366 days`,
			`line 8: rules[1] "b": unknown field "shadw" (did you mean "shadow"?)`,
			`line 10: descriptors[0] "auth/login": unit: window: "fortnight"`,
		}},
	} {
		t.Run(tt.format.String(), func(t *testing.T) {
			_, err := parse([]byte(tt.src), tt.format)
			require.Error(t, err)
			got := strings.Split(err.Error(), "\n")
			require.Len(t, got, len(tt.want), err.Error())
			for i, w := range tt.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

func TestJSONStructure(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"rules not a list", `{"rules": {"name": "a"}}`, `rules: must be a list`},
		{"rules null is empty", `{"rules": null}`, `no rules and no descriptors`},
		{"descriptors not a list", `{"descriptors": 3}`, `descriptors: must be a list`},
		{"defaults not an object", `{"defaults": [], "rules": []}`, `defaults: must be an object`},
		{"deep nesting", `{"rules": [{"x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}]}`, `nested deeper than 32 levels`},
		{"truncated", `{"rules": [{"name": "a"`, `unexpected EOF`},
		{"empty", ``, `unexpected EOF`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.src), syntaxJSON)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestMethodsAreHTTPMethods guards against a misspelt method loading as a
// rule that never matches ("GTE").
func TestMethodsAreHTTPMethods(t *testing.T) {
	for _, m := range httpMethods {
		src := fmt.Sprintf("rules:\n  - {name: a, route: /a, methods: [%s], limits: [1/s]}\n", strings.ToLower(m))
		s := mustParse(t, src)
		assert.Equal(t, []string{m}, s.Rules()[0].Methods)
	}
	for _, tt := range []struct{ method, want string }{
		{"GTE", `"GTE" is not an HTTP method (did you mean "GET"?)`},
		{"POTS", `(did you mean "POST"?)`},
		{"PROPFIND", `"PROPFIND" is not an HTTP method; use GET, HEAD, POST`},
		{"G-E-T", `is not an HTTP method`},
		{"\"\"", `"" is not an HTTP method`},
	} {
		t.Run(tt.method, func(t *testing.T) {
			_, err := parse([]byte(fmt.Sprintf("rules:\n  - {name: a, route: /a, methods: [%s], limits: [1/s]}\n", tt.method)), syntaxYAML)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// tiesPairwise is the definition of a tie, checked pair by pair: the
// oracle for checkTies. It returns, for each rule that ties with an
// earlier one, the earliest such rule.
func tiesPairwise(rules []Rule) map[int]int {
	out := map[int]int{}
	for j := range rules {
		for i := 0; i < j; i++ {
			a, b := &rules[i], &rules[j]
			if a.id != b.id || canonical(a.Route) != canonical(b.Route) || (len(a.Methods) == 0) != (len(b.Methods) == 0) {
				continue
			}
			overlap := len(a.Methods) == 0
			for _, m := range append(slices.Clone(b.Methods), "HEAD") {
				overlap = overlap || a.matchesMethod(m) && b.matchesMethod(m)
			}
			if overlap {
				out[j] = i
				break
			}
		}
	}
	return out
}

// TestCheckTiesMatchesPairwise is a property test: on random rule sets
// drawn from a small space (so ties are common), the linear tie check
// flags exactly the rules the pairwise definition flags, against the same
// earlier rule.
func TestCheckTiesMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	routes := []string{"/a", "/a/{id}", "/a/:x", "/b", "/*", "/a/*"}
	methods := []string{"GET", "HEAD", "POST", "PUT"}
	for round := range 2000 {
		n := 1 + rng.IntN(8)
		rs := make([]Rule, n)
		for i := range rs {
			rs[i] = Rule{Name: fmt.Sprintf("r%d", i), Route: routes[rng.IntN(len(routes))], id: identity(rng.IntN(3))}
			for _, m := range methods {
				if rng.IntN(3) == 0 {
					rs[i].Methods = append(rs[i].Methods, m)
				}
			}
		}
		var c collector
		checkTies(rs, &c)
		got := map[int]int{}
		for _, err := range c.errs {
			e := err.(*Error)
			var i int
			_, serr := fmt.Sscanf(e.Msg, "matches the same requests as rules[%d]", &i)
			require.NoError(t, serr)
			got[e.Index] = i
		}
		require.Equal(t, tiesPairwise(rs), got, "round %d: %+v", round, rs)
	}
}

// manyRules writes a rules file of n distinct rules (the shape of the
// 4 MB, 60,000-rule file that did not load in 10 minutes when the tie
// check was quadratic), with a tie at the end when tie is set.
func manyRules(format syntax, n int, tie bool) []byte {
	var b strings.Builder
	if format == syntaxJSON {
		b.WriteString(`{"rules": [`)
	} else {
		b.WriteString("rules:\n")
	}
	for i := range n {
		route := fmt.Sprintf("/v%d/{id}", i)
		if tie && i == n-1 {
			route = "/v0/:x"
		}
		if format == syntaxJSON {
			if i > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, `{"name":"r%d","route":%q,"limits":["1/m"]}`, i, route)
		} else {
			fmt.Fprintf(&b, "- {name: r%d, route: %q, limits: [1/m]}\n", i, route)
		}
	}
	if format == syntaxJSON {
		b.WriteString("]}")
	}
	return []byte(b.String())
}

// TestManyRulesLoad loads 60,000 rules in both syntaxes (no timing
// assertion: BenchmarkParseManyRules has the figures) and finds a tie
// between the first and the last.
func TestManyRulesLoad(t *testing.T) {
	n := 60000
	if testing.Short() || raceEnabled {
		n = 5000 // the race detector makes the 60,000-rule load take a minute
	}
	for _, f := range []syntax{syntaxYAML, syntaxJSON} {
		t.Run(f.String(), func(t *testing.T) {
			data := manyRules(f, n, false)
			require.LessOrEqual(t, len(data), maxFileSize)
			s, err := parse(data, f)
			require.NoError(t, err)
			assert.Len(t, s.Rules(), n)
			_, err = parse(manyRules(f, n, true), f)
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmt.Sprintf(`rules[%d] "r%d": matches the same requests as rules[0] "r0"`, n-1, n-1))
		})
	}
}

func BenchmarkParseManyRules(b *testing.B) {
	for _, f := range []syntax{syntaxJSON, syntaxYAML} {
		for _, n := range []int{4000, 60000} {
			data := manyRules(f, n, false)
			b.Run(fmt.Sprintf("%s/%d", f, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := parse(data, f); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// FuzzParse feeds arbitrary files to both loaders: they must not panic,
// every problem must be an *Error, and a file that loads must encode to a
// file that loads back to the same rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"rules": [{"name": "a", "route": "/a", "limits": ["1/s", {"requests": 2, "window": "1m"}]}]}`), true)
	f.Add([]byte(`{"defaults": {"shadow": true, "shadow": false}, "rules": [{"name": "a", "route": "/a/{x}", "methods": ["GET"], "limits": ["1/s"]}]}`), true)
	f.Add(defaultFile(), false)
	f.Add([]byte("rules:\n  - {name: a, route: /a, limits: [1 per 213504d]}\n"), false)
	f.Add([]byte(`{"rules": [{"name": "a", "route": "/a", "tier": "claim:plan", "tiers": {"pro": ["2/s"], "default": ["1/s"]}, "overrides": {"user:x": ["3/s"]}, "count": {"status": ">=400", "reset_on": "success"}, "also": [{"name": "b", "key": "ip", "limits": ["5/s"]}]}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		format := syntaxYAML
		if isJSON {
			format = syntaxJSON
		}
		s, err := parse(data, format)
		if err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				if _, ok := e.(*Error); !ok {
					t.Fatalf("problem %v is a %T, not an *Error", e, e)
				}
			}
			return
		}
		out, err := s.encodeJSON()
		require.NoError(t, err)
		back, err := parse(out, syntaxJSON)
		require.NoError(t, err, "%s", out)
		require.Equal(t, len(s.Rules()), len(back.Rules()))
		for i, r := range s.Rules() {
			b := back.Rules()[i]
			require.Equal(t, r.Policy(), b.Policy())
			require.Equal(t, r.Methods, b.Methods)
		}
	})
}

// hostileFiles are worst-case inputs of nearly size bytes: one object
// with tens of thousands of unknown 64-byte keys, the same key repeated,
// and a long array of scalars where a rule should be.
func hostileFiles(size int) map[string][]byte {
	fill := func(head, item, tail string) []byte {
		var b strings.Builder
		b.WriteString(head)
		for i := 0; b.Len()+len(item)+len(tail)+24 < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, item, i)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	long := strings.Repeat("x", 56)
	return map[string][]byte{
		"unknown-keys":  fill(`{"rules": [{`, `"`+long+`%08d": 1`, `}]}`),
		"repeated-key":  fill(`{"rules": [{`, `"limits": %d`, `}]}`),
		"scalar-array":  fill(`{"rules": [{"name": "a", "route": "/a", "limits": ["1/s"], "x": [`, `%d`, `]}]}`),
		"many-problems": fill(`{"rules": [`, `{"name": "r%d", "route": "x", "limits": ["0/s"]}`, `]}`),
	}
}

// TestHostileFiles: worst-case files end in an error (or load), capped at
// maxErrors problems; BenchmarkParseHostile has the times.
func TestHostileFiles(t *testing.T) {
	size := maxFileSize
	if testing.Short() || raceEnabled {
		size /= 16 // the race detector makes the full size take half a minute
	}
	for name, data := range hostileFiles(size) {
		t.Run(name, func(t *testing.T) {
			require.LessOrEqual(t, len(data), maxFileSize)
			_, err := parse(data, syntaxJSON)
			if err != nil {
				assert.LessOrEqual(t, strings.Count(err.Error(), "\n")+1, maxErrors)
			}
		})
	}
}

func BenchmarkParseHostile(b *testing.B) {
	for name, data := range hostileFiles(maxFileSize) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				parse(data, syntaxJSON)
			}
		})
	}
}

// BenchmarkTieCheck compares the hashed tie check with the pairwise one it
// replaced (tiesPairwise, the same definition), on the same rules.
func BenchmarkTieCheck(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		s, err := parse(manyRules(syntaxYAML, n, false), syntaxYAML)
		require.NoError(b, err)
		rs := s.rules
		b.Run(fmt.Sprintf("pairwise/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tiesPairwise(rs)
			}
		})
		b.Run(fmt.Sprintf("hashed/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				checkTies(rs, &collector{})
			}
		})
	}
}

// TestFleetSwitches: mode, sync and fleet_size reach the policy, take
// defaults, round-trip, and are checked with clear errors.
func TestFleetSwitches(t *testing.T) {
	src := `
defaults:
  mode: write-back
  sync: 250ms
rules:
  - name: wb
    route: /a
    limits: ["10 per 1m"]
  - name: ex
    route: /b
    mode: exact
    limits: ["10 per 1m"]
  - name: loc
    route: /c
    fail_mode: local
    fleet_size: 4
    sync: 1s
    limits: ["10 per 1m"]
`
	s, err := parse([]byte(src), syntaxYAML)
	require.NoError(t, err)
	byName := map[string]core.Policy{}
	for _, r := range s.Rules() {
		byName[r.Name] = r.Policy()
	}
	assert.Equal(t, core.ModeWriteBack, byName["wb"].Mode)
	assert.Equal(t, 250*time.Millisecond, byName["wb"].Sync)
	assert.Equal(t, core.ModeExact, byName["ex"].Mode)
	assert.Zero(t, byName["ex"].Sync, "exact drops the default sync")
	assert.Equal(t, core.FailLocal, byName["loc"].FailMode)
	assert.Equal(t, 4, byName["loc"].FleetSize)
	assert.Equal(t, time.Second, byName["loc"].Sync)

	out, err := s.encodeYAML()
	require.NoError(t, err)
	s2, err := parse(out, syntaxYAML)
	require.NoError(t, err, string(out))
	for _, r := range s2.Rules() {
		p := r.Policy()
		assert.Equal(t, byName[r.Name].Mode, p.Mode, r.Name)
		assert.Equal(t, byName[r.Name].Sync, p.Sync, r.Name)
		assert.Equal(t, byName[r.Name].FleetSize, p.FleetSize, r.Name)
		assert.Equal(t, byName[r.Name].FailMode, p.FailMode, r.Name)
	}

	bad := `
rules:
  - name: a
    route: /a
    mode: lazy
    limits: ["10 per 1m"]
  - name: b
    route: /b
    sync: forever
    limits: ["10 per 1m"]
  - name: c
    route: /c
    sync: 2h
    limits: ["10 per 1m"]
  - name: d
    route: /d
    fleet_size: 0
    limits: ["10 per 1m"]
  - name: e
    route: /e
    mode: exact
    sync: 1s
    limits: ["10 per 1m"]
`
	_, err = parse([]byte(bad), syntaxYAML)
	require.Error(t, err)
	for _, want := range []string{`unknown mode "lazy"`, `"forever" is not a duration`, `"2h" must be above 0`, "fleet_size: 0 must be in [1,", "applies to mode write-back only"} {
		assert.Contains(t, err.Error(), want)
	}
}

// TestYAMLErrorFieldIsDeterministic: a YAML error on a line holding
// several fields of one rule (a flow mapping) names no field: the line
// alone cannot tell which, and picking one in a map's order named a
// different field from run to run. The same input must always give the
// same message.
func TestYAMLErrorFieldIsDeterministic(t *testing.T) {
	in := "rules:\n  - {name: a, route: \"GET /x\", limits: [\"10/m\"], route: \"GET /y\"}\n"
	want := `rules: line 2: rules[0]: mapping key "route" already defined at line 2`
	for i := 0; i < 50; i++ {
		_, err := parse([]byte(in), syntaxYAML)
		if err == nil || err.Error() != want {
			t.Fatalf("run %d: got %v, want %s", i, err, want)
		}
	}
}

// TestParseSniffsSyntax: Parse reads a document whose first non-blank
// byte is '{' as JSON (with JSON's errors) and anything else as YAML, so
// the same rule in either syntax, with leading blank lines, parses alike.
func TestParseSniffsSyntax(t *testing.T) {
	for _, src := range []string{
		"\n  {\"rules\":[{\"name\":\"a\",\"route\":\"/a\",\"limits\":[\"5 per 1m\"]}]}",
		"\n# a comment first\nrules:\n  - {name: a, route: /a, limits: [\"5 per 1m\"]}\n",
	} {
		s, err := Parse([]byte(src))
		require.NoError(t, err, src)
		r, ok := s.Rule("a")
		require.True(t, ok)
		assert.Equal(t, "5 per 1m", r.Limits[0].String())
	}
	assert.Equal(t, syntaxJSON, sniff([]byte(" \t\r\n{")))
	assert.Equal(t, syntaxYAML, sniff([]byte("rules: []")))
	assert.Equal(t, syntaxYAML, sniff(nil))
	// a JSON syntax error is reported as JSON's, not YAML's
	_, err := Parse([]byte(`{"rules": [}`))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "yaml")
}
