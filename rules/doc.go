// Package rules describes rate limits as data: a YAML or JSON file of
// rules, each matching some requests and naming the policy that limits
// them, and a matcher that picks the rule for a request.
//
// # The file
//
//	version: 1                # optional; 1 is the only version
//	defaults:                 # optional; applied to every rule and descriptor
//	  algorithm: gcra         #   that does not set the field itself
//	  fail_mode: open
//	rules:
//	  - name: api2-post       # required, unique: the policy name (A-Z a-z 0-9 _ . : -)
//	    methods: [POST]       # optional; GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH;
//	                          #   empty, [*] or [ANY] = any method; GET also matches HEAD
//	    route: /api2          # required; see "Routes"
//	    identity: authenticated   # authenticated | anonymous | any (default any)
//	    key: user             # user | api_key | ip | header:<Name> | form:<field>
//	                          #   (default: user when authenticated, else ip;
//	                          #   form: a field of a form body, read up to 64 KiB;
//	                          #   what it cannot read is refused: 400, 413, 415)
//	    algorithm: gcra       # gcra | token_bucket | fixed_window | sliding_log | sliding_counter
//	    limits:               # one or more; all must hold
//	      - 500 per 15m
//	      - {requests: 100, window: 1m}    # the structured form
//	    buckets: 0            # sliding_counter sub-windows
//	    shadow: false         # report, never deny
//	    soft_percent: 0       # tolerate this % over each limit
//	    count_denied: false   # denied requests consume quota
//	    fail_mode: open       # open | closed | local, when the store fails
//	                          #   (local: the fleet tier's local store, limits / fleet_size)
//	    mode: exact           # fleet tier only: exact | write-back (default: the tier's)
//	    sync: 100ms           # fleet tier only: write-back sync interval (default: the tier's)
//	    fleet_size: 4         # fleet tier only: servers sharing the store, for fail_mode local
//	    elastic: {ceiling: 200%, capacity: "5000 per 1m", max_in_flight: 200}
//	                          # above the limits up to the ceiling while there is room; see [Elastic]
//	                          #   (off: opt out of a default; signals attached by [Set.WithSignals])
//	    tier: claim:plan      # where the request's tier is read: claim:<name> | header:<Name>
//	    tiers: {pro: ["1000 per 1m"], default: ["100 per 1m"]}
//	                          # each tier's limits (at most 16 besides default, the
//	                          #   limits of a missing or unknown tier; or write limits:)
//	    overrides: {"key:k_big": ["50000 per 1m"]}   # user:<id> | key:<API key> | ip:<addr>
//	    count: {status: [401], reset_on: success, charge: after}
//	                          # count only these responses (or status: ">=400"); see [Count]
//	    also: [{name: login-ip, key: ip, limits: ["100 per 15m"]}]
//	                          # more checks every request of the rule must pass
//	descriptors:
//	  - {domain: auth, key: login, unit: minute, requests: 10}
//
// A limit's short form is parsed by [ParseLimit]: "900 per 15m",
// "10 per minute", "5 per day", "100/s", "20 per 1s burst 40". The
// structured form takes requests, window (the same window syntax) and
// burst. JSON files have the same fields, with limits as strings or
// objects.
//
// A window is exact: it is at most 366 days and a whole
// number of microseconds, or the file does not load; no count or unit can
// overflow into a different window. Methods are the standard ones above
// (extension methods such as WebDAV's are not accepted; leave methods out
// to match every method).
//
// Unknown fields and keys written twice (at any depth, in YAML and JSON)
// are errors (with a did-you-mean for unknown fields), and every problem
// is reported at once, in line order, with its line, the rule's index and
// name, the field and what to fix; see [Error]. A syntax error or a value
// of the wrong type stops the load before the rules are checked. Files are
// at most 4 MiB; loading time is linear in the number of rules.
// Each rule's policy is checked with
// [core.Policy.Validate] at load time, so a Set that loaded has only valid
// policies. Rules that would tie on every precedence criterion below for
// some request are rejected, since the later one could never apply.
//
// # Routes
//
//	/api1          exactly /api1
//	/users/{id}    one non-empty segment in place of {id} (or :id)
//	/api/*         /api/ followed by anything; not /api itself
//	/*             every path
//
// A wildcard may only end a pattern. A parameter segment also matches a
// framework's own parameter segment, so a rule /users/{id} matches the
// route pattern /users/:id that gin or echo report.
//
// # Precedence
//
// [Set.Match] returns the most specific rule that matches the method, the
// path and the caller's identity class. Rules are compared criterion by
// criterion; the first that differs decides:
//
//  1. Route: a fully literal route (/api1) beats any pattern; then more
//     literal segments win (/api/v1/* over /api/*, /users/{id} over
//     /{a}/{b}); then a pattern without the trailing wildcard wins
//     (/users/{id} over /users/*); then more parameter segments. /* loses
//     to everything.
//  2. Method: a rule listing methods beats a rule for any method.
//  3. Identity: authenticated or anonymous beats any.
//  4. File order: the earlier rule wins.
//
// A request that matches no rule is not limited by the Set (Match returns
// nil); add a catch-all rule (route /*) to limit everything.
//
// Match on the route pattern the router matched when the framework
// reports it (r.Pattern, gin's FullPath, echo's Path, fiber's Route().Path):
// a raw path can be spelled in ways the router treats as the same route
// (/api1/ with redirect-trailing-slash, //api1, percent-encoding), and a
// rule keyed on the raw spelling can then be side-stepped.
//
// # Tiers, overrides, counting by outcome
//
// A rule's tiers, overrides and also: checks are policies of their own,
// so their counters never mix: a tier is named "<rule>/<tier>",
// an override "<rule>/o-<the first 8 bytes of SHA-256(client), hex>" (the client never
// appears), an also: check by its name; the rule's own policy is the
// default tier. [Set.Policies] lists them after the descriptors, a
// [Live] keeps their state across reloads like any policy's, and
// [NewLive] hands every limiter of a rule ([Limiters]) to the build
// function. Package rules/serve turns a Set into adapter middleware. The
// guide with complete programs is docs/policies.md.
//
// # Descriptors
//
// The design notes' generic descriptors — domain / key / unit / requests,
// e.g. auth/login 10 per minute, messaging/email 5 per day — are named
// policies that are not bound to a route: [Set.Descriptor] looks one up and
// the application applies it where the event happens, with a key it
// chooses (the account being logged into, the sender). A descriptor's
// policy is named "<domain>/<key>" and takes the same switches as a rule;
// instead of unit and requests it may list limits. Rule names cannot
// contain '/', so the two never collide.
//
// # Reloading
//
// A [Live] serves a Set with one [core.Limiter] per rule and descriptor
// and swaps in a new Set atomically while serving ([Live.Swap],
// [Live.ReloadFile]): each request acquires one [Snapshot] and is decided
// wholly by it. Rules whose name and limits did not change keep their
// state; see [Live] for what a changed rule starts from on each store.
//
// # Embedded example
//
// [Default] is the design notes' endpoint table (the file rules/default.yaml), which
// the programs under _examples serve.
//
// Everything in this package is safe for concurrent use once loaded; none
// of it is on a hot path except [Set.Match], which does not allocate, and
// [Live.Acquire] and [Snapshot.Release] (two atomic operations, no
// allocation).
package rules
