package rls

import (
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// unit is a rate limit unit, the protocol's enumeration.
type unit = pb.RateLimitResponse_RateLimit_Unit

// parseUnit reads a unit name as the reference does (case-insensitive;
// UNKNOWN and "" are not units).
func parseUnit(s string) (unit, bool) {
	v, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	if !ok || v == int32(pb.RateLimitResponse_RateLimit_UNKNOWN) {
		return 0, false
	}
	return unit(v), true
}

// unitSeconds is the reference's divider: a month is 30 days and a year
// 365, windows aligned to the Unix epoch. 0 for an unknown unit.
func unitSeconds(u unit) int64 {
	switch u {
	case pb.RateLimitResponse_RateLimit_SECOND:
		return 1
	case pb.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case pb.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case pb.RateLimitResponse_RateLimit_DAY:
		return 86400
	case pb.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case pb.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case pb.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}
