package rls

import (
	"slices"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/limitkit/limitkit/core"
)

// wildcardMatch reports whether value matches a pattern split on '*'
// (each '*' matches zero or more bytes), as the reference's does.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	if !strings.HasPrefix(value, parts[0]) || !strings.HasSuffix(value, parts[len(parts)-1]) {
		return false
	}
	fixed := 0
	for _, p := range parts {
		fixed += len(p)
	}
	if len(value) < fixed {
		return false
	}
	rest := value[len(parts[0]):]
	if last := parts[len(parts)-1]; last != "" {
		rest = rest[:len(rest)-len(last)]
	}
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// lookup finds the rule of a request's descriptor as the reference's
// GetLimit does: entry by entry, "key_value" first, then the first
// wildcard of the level that matches, then "key" alone; the rule counts
// only when it sits at the descriptor's last entry. share holds, for the
// entries matched by a share_threshold wildcard, the pattern that replaces
// the value in the counter's key (nil when none).
func (c *Config) lookup(domain string, d *rlpb.RateLimitDescriptor) (r *rule, share []string) {
	n := c.domains[domain]
	if n == nil {
		return nil, nil
	}
	entries := d.GetEntries()
	for i, e := range entries {
		k, v := e.GetKey(), e.GetValue()
		next := n.children[k+"_"+v]
		if next == nil && len(n.wild) > 0 {
			for _, w := range n.wild {
				if wildMatchKV(w.parts, k, v) {
					next = n.children[w.key]
					break
				}
			}
		}
		if next == nil {
			next = n.children[k]
		}
		if next == nil {
			break
		}
		if next.share != "" {
			if share == nil {
				share = make([]string, len(entries))
			}
			share[i] = next.share
		}
		if next.rule != nil && i == len(entries)-1 {
			r = next.rule
		}
		if len(next.children) == 0 {
			break
		}
		n = next
	}
	if r == nil {
		share = nil
	}
	return r, share
}

// wildMatchKV is wildcardMatch(parts, k+"_"+v) without building the string
// (a request's value may be large; nothing is allocated per request).
func wildMatchKV(parts []string, k, v string) bool {
	p0 := parts[0]
	if len(p0) < len(k)+1 {
		// a '*' inside the pattern's key part: match the joined string
		return wildcardMatch(parts, k+"_"+v)
	}
	if p0[:len(k)] != k || p0[len(k)] != '_' {
		return false
	}
	vp := make([]string, 0, 8)
	vp = append(vp, p0[len(k)+1:])
	vp = append(vp, parts[1:]...)
	return wildcardMatch(vp, v)
}

// Match returns what [Server.ShouldRateLimit] charges for a descriptor of
// domain whose entries are kv, key and value pairs in request order
// (cfg.Match("edge", "api_key", "abc") for Envoy's descriptor
// [(api_key, abc)]): the rule's policy and the descriptor's client key.
// ok is false when no rule with a limit applies (no match, unlimited,
// requests_per_unit 0), kv is empty or of odd length, or it holds more
// than 64 entries.
//
// This is the contract that lets a Go service share a quota with Envoy:
// a core.Limiter of policy on the Server's store (or any store on the
// same Redis) and a limitkit HTTP middleware built with
// httplimit.WithScope("") and a key function returning key charge the
// very counter ShouldRateLimit charges (its store key is
// httplimit.StoreKey("", key): '|' and key). The policy is named "rls:"
// and the rule's full key ("rls:edge.api_key"); the key is each entry's
// key and value, length-prefixed ("7:api_key3:abc"), a share_threshold
// wildcard's pattern ('*' and the pattern) in place of the value it
// matched, and, when longer than 256 bytes, "~" and 32 hex digits of its
// SHA-256. Both are stable across releases; a change is a breaking one.
// Policies of one name on one store must be equal (core.SameState), so
// build the middleware's limiter from this policy, not a hand-written one.
//
// Match allocates; call it once per request at most. It is safe for
// concurrent use; a nil Config matches nothing.
func (c *Config) Match(domain string, kv ...string) (policy core.Policy, key string, ok bool) {
	if c == nil || len(kv) == 0 || len(kv)%2 != 0 || len(kv) > 2*maxEntries {
		return core.Policy{}, "", false
	}
	entries := make([]*rlpb.RateLimitDescriptor_Entry, len(kv)/2)
	for i := range entries {
		entries[i] = &rlpb.RateLimitDescriptor_Entry{Key: kv[2*i], Value: kv[2*i+1]}
	}
	r, share := c.lookup(domain, &rlpb.RateLimitDescriptor{Entries: entries})
	if r == nil || r.policy == nil {
		return core.Policy{}, "", false
	}
	p := *r.policy
	p.Limits = slices.Clone(p.Limits)
	return p, counterKey("", entries, share)[1:], true
}
