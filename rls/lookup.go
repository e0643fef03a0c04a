package rls

import (
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
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
