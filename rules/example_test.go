package rules_test

import (
	"fmt"

	"github.com/limitkit/limitkit/rules"
)

func ExampleParse() {
	set, err := rules.Parse([]byte(`
rules:
  - name: login
    methods: [POST]
    route: /login
    identity: anonymous
    key: ip
    count_denied: true
    limits: ["10 per minute", "100 per day"]
  - name: api
    route: /api/*
    identity: authenticated
    limits: ["20 per 1s burst 40"]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range set.Rules() {
		p := r.Policy()
		fmt.Println(p.Name, r.Key, p.Algorithm, p.Limits, p.CountDenied)
	}
	// Output:
	// login ip gcra [10 per 1m 100 per 24h] true
	// api user gcra [20 per 1s burst 40] false
}

func ExampleParse_errors() {
	_, err := rules.Parse([]byte(`
rules:
  - name: api
    route: api/*
    metods: [GET]
    limits: ["20 per 1s"]
`))
	fmt.Println(err)
	// Output:
	// rules: line 4: rules[0] "api": route: must start with "/"
	// rules: line 5: rules[0] "api": unknown field "metods" (did you mean "methods"?); known fields: name, methods, route, identity, key, limits, timezone, week_start, concurrency, lease, algorithm, buckets, shadow, soft_percent, count_denied, fail_mode, mode, sync, fleet_size, elastic, tier, tiers, overrides, count, also
}

func ExampleSet_Match() {
	set := rules.Default() // the design notes' endpoint table
	for _, q := range []struct {
		method, path string
		auth         bool
	}{
		{"POST", "/api2", true},
		{"GET", "/api2", false},
		{"GET", "/elsewhere", true},
	} {
		if r := set.Match(q.method, q.path, q.auth); r != nil {
			fmt.Println(q.method, q.path, q.auth, "->", r.Name, r.Limits)
		} else {
			fmt.Println(q.method, q.path, q.auth, "-> not limited")
		}
	}
	// Output:
	// POST /api2 true -> api2-post [500 per 15m 100 per 1m]
	// GET /api2 false -> anonymous-get [250 per 15m 50 per 1m]
	// GET /elsewhere true -> not limited
}

func ExampleParseLimit() {
	for _, s := range []string{"900 per 15m", "5 per day", "100/s", "10 per 1s burst 20"} {
		l, err := rules.ParseLimit(s)
		fmt.Println(l, err)
	}
	// Output:
	// 900 per 15m <nil>
	// 5 per 24h <nil>
	// 100 per 1s <nil>
	// 10 per 1s burst 20 <nil>
}

func ExampleSet_Descriptor() {
	d, ok := rules.Default().Descriptor("auth", "login")
	fmt.Println(ok, d.Policy().Name, d.Limits, d.CountDenied, d.FailMode)
	// Output: true auth/login [10 per 1m] true closed
}
