package rules

import (
	"fmt"
	"strings"
)

// The fields of each mapping of a rules file, for the walks that find
// unknown ones.
var (
	topKeys        = []string{"version", "defaults", "rules", "descriptors"}
	switchKeys     = []string{"algorithm", "buckets", "shadow", "soft_percent", "count_denied", "fail_mode", "mode", "sync", "fleet_size", "elastic"}
	ruleKeys       = append(append([]string{"name", "methods", "route", "identity", "key", "limits", "timezone", "week_start", "concurrency", "lease"}, switchKeys...), policiesKeys...)
	descriptorKeys = append([]string{"domain", "key", "unit", "requests", "limits"}, switchKeys...)
	limitKeys      = []string{"requests", "window", "burst"}
)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unknownField says a field is unknown, suggests the closest known one
// and lists them all.
func unknownField(name string, known []string) string {
	msg := fmt.Sprintf("unknown field %q", name)
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg + "; known fields: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance, for short field names.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
