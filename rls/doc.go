// Package rls serves Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from
// limitkit's limiters and stores, so that Envoy, Istio and Envoy Gateway
// share quotas with Go services using the same store. The command
// cmd/limitkit-rls runs it; this package is for mounting it in your own
// gRPC server:
//
//	cfg, err := rls.LoadConfig("/etc/ratelimit/config") // a file or a directory
//	srv, err := rls.New(store, cfg)                      // memstore, redisstore or a fleet tier
//	pb.RegisterRateLimitServiceServer(grpcServer, srv)
//	...
//	err = srv.Reload(newCfg)                             // atomic; old config serves on error
//
// # Configuration
//
// envoyproxy/ratelimit's YAML, read as it is: domain, nested descriptors
// (key, value, wildcards: a '*' in a value matches any run of bytes, the
// first matching wildcard of a level in file order after the exact
// key_value and before the key alone), rate_limit (unit second, minute,
// hour, day, week, month = 30 days, year = 365 days; requests_per_unit;
// unlimited; name; replaces), shadow_mode, share_threshold,
// detailed_metric, value_to_metric and metadata (accepted; they only name
// the reference's statistics). A rule applies only when it sits at the
// request descriptor's last entry, as in the reference. A file without
// limitkit's fields is decided as the reference decides it: a fixed window
// aligned to the Unix epoch per counter, whose key is the domain and the
// request's entries (share_threshold: the wildcard pattern instead of the
// value), and the same limit_remaining and duration_until_reset.
//
// limitkit's extensions, inside rate_limit (a file using them is no longer
// valid for the reference server, which refuses unknown keys):
//
//	algorithm: gcra | token_bucket | fixed_window | sliding_window_log | sliding_window_counter
//	burst:     the bucket size of gcra and token_bucket (default requests_per_unit)
//	fail_mode: open (default) | closed | local — what a failed store call decides
//
// Refused at load, with the file and the reason: unknown keys, an empty
// domain or key, a duplicate domain or composite key, an invalid unit,
// unlimited with a unit, bad replaces, share_threshold without '*',
// quota_mode (not supported), requests_per_unit above 2^31-1 (limitkit's
// counters are 31 bits), nesting deeper than 32 levels, more than 20,000
// descriptors, more than 16 MiB of YAML or keys and values over 1 KiB.
//
// # Answers, and where they differ from envoyproxy/ratelimit's
//
// The codes, current_limit, limit_remaining and duration_until_reset of
// fixed-window rules equal the reference's for any request script in which
// no request is denied over a descriptor that another descriptor of the
// same request, or a later request, would then see charged. The
// deliberate differences:
//
//   - All or nothing. The reference increments every descriptor of a
//     request, even when the request is denied (and keeps incrementing a
//     key that is over its limit). Here a denied request charges nothing:
//     the descriptors are charged in order; at the first one over its
//     limit, those charged before it are refunded (core.Limiter.Refund:
//     exact for fixed windows and GCRA within the window) and those after
//     it are only peeked, to report their codes. A client that keeps
//     retrying therefore regains access when the window has room, and a
//     counter never runs past its limit; under contention a request may
//     briefly see a charge that is being refunded (it is denied; nothing
//     is ever over-admitted). Policies of token_bucket and the sliding
//     windows cannot be refunded: a request denied by a later descriptor
//     keeps their charge (order such descriptors last).
//   - hits_addend over the limit: the reference counts it (the key stays
//     over the limit for the window); here the request is denied and
//     charges nothing, so a smaller later request may be admitted.
//   - shadow_mode: answered OK as in the reference, with limit_remaining 0
//     when over; an over-limit request in shadow mode consumes nothing.
//   - Store failure: the reference answers the RPC with an error (Envoy
//     then applies its failure_mode_deny); here the rule's fail mode
//     decides within the store deadline (open by default: OK).
//   - is_negative_hits refunds hits_addend (the field's documented
//     meaning); the reference ignores the flag.
//   - A limit override (the descriptor's limit) counts on its own key per
//     (unit, requests_per_unit), not on the configured rule's counter.
//   - Request bounds: more than 128 descriptors, more than 64 entries in
//     a descriptor or a domain over 1 KiB is InvalidArgument, and a limit
//     override beyond the 1,024 distinct (unit, requests_per_unit) pairs
//     a Server keeps is ResourceExhausted; a descriptor's counter key
//     over 256 bytes is hashed (SHA-256), so a 1 MB value costs one hash,
//     not 1 MB of store memory.
//   - response_headers_to_add (on by default, [WithHeaders]) are limitkit's
//     X-Ratelimit-Limit, X-Ratelimit-Remaining, X-Ratelimit-Reset (Unix
//     seconds) and Retry-After, not the reference's RateLimit-* names.
//
// As in the reference: an empty domain or an empty descriptor list is an
// error; a domain or descriptor that matches no rule is OK (with no
// current_limit); unlimited answers OK with limit_remaining 2^32-1;
// requests_per_unit 0 denies every hit; hits_addend 0 charges nothing and
// answers where the counter stands; the request's hits_addend applies to
// descriptors without their own, 0 meaning 1; replaces drops the named
// rules from the request.
//
// # Sharing a quota with a Go service
//
// A rule's counter is the one a limitkit HTTP middleware charges when its
// limiter has the rule's policy, on the same store, its scope is ""
// (httplimit.WithScope("")) and its key function returns the key
// [Config.Match] gives for the request's descriptor: the policy name and
// the key encoding Match documents are a stable contract. _examples/rls
// runs both.
//
// # Metrics
//
// Each rule is a core policy named "rls:" and its full key
// ("rls:edge.remote_address"; a name with other characters, or longer than
// 64 bytes, ends in a hash). Pass core.WithObserver through
// [WithLimiterOptions] to export decisions per rule with package metrics
// (limitkit_decisions_total{policy,outcome}: allowed = within_limit,
// denied = over_limit, shadowed = shadow_mode) or otellimit, and
// [WithNearLimit] for the reference's near_limit (hits above 80% of a
// rule's limit; cmd/limitkit-rls exports limitkit_rls_near_limit_total).
package rls
