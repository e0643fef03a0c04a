package respond

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/limitkit/limitkit/core"
)

// Problem types and titles of draft-ietf-httpapi-ratelimit-headers-10,
// section 5, and RFC 9457.
const (
	ProblemTypeQuotaExceeded  = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	ProblemTitleQuotaExceeded = "Request cannot be satisfied as assigned quota has been exceeded"
)

type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
}

// QuotaExceededBody is the default denial body: an RFC 9457 problem of the
// IETF draft's quota-exceeded type, naming the violated policy, e.g.
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Request cannot be satisfied as assigned quota has been exceeded",
//	 "status":429,"violated-policies":["api"]}
//
// (on one line). Built once per policy at construction.
func QuotaExceededBody(status int, policy string) []byte {
	p := problem{Type: ProblemTypeQuotaExceeded, Title: ProblemTitleQuotaExceeded, Status: status}
	if policy != "" {
		p.Violated = []string{policy}
	}
	b, _ := json.Marshal(p) // cannot fail: strings and an int
	return b
}

// UnavailableBody is the body of the 503 answered when a FailClosed
// policy's store failed: a plain RFC 9457 "about:blank" problem. It never
// carries the store's error text.
func UnavailableBody() []byte {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(http.StatusServiceUnavailable), Status: http.StatusServiceUnavailable})
	return b
}

// NoKeyStatus is the status of a no-key denial: the request carries
// nothing the limiter can count it by (no API key under WithNoKeyDeny, or not
// even a peer IP to fall back to, as on a Unix socket). It is not a quota
// denial, so it is not 429: nothing was counted, and retrying cannot help.
const NoKeyStatus = http.StatusForbidden

// NoKeyBody is the body of a no-key denial: a plain RFC 9457
// "about:blank" problem with status [NoKeyStatus]. Unlike
// [QuotaExceededBody] it claims no quota and names no policy:
//
//	{"type":"about:blank","title":"Forbidden","status":403,
//	 "detail":"The request carries no client identity to rate-limit it by."}
func NoKeyBody() []byte {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(NoKeyStatus), Status: NoKeyStatus,
		Detail: "The request carries no client identity to rate-limit it by."})
	return b
}

// RefusedBody is the body of a refusal (httplimit.ReasonRefused): a plain
// RFC 9457 "about:blank" problem with the refusal's status and detail,
// which names no quota:
//
//	{"type":"about:blank","title":"Bad Request","status":400,
//	 "detail":"The request body is not valid form encoding."}
func RefusedBody(status int, detail string) []byte {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
	return b
}

// LimitIDs returns the IETF quota-policy identifier of each limit of p: the
// policy name when p has one limit; "name-<window>" ("api-15m", "api-1m")
// when it has several, or "name-<index>" if two windows are equal.
// Policy names are [A-Za-z0-9_.:/-], so identifiers never need escaping in
// a structured-field String.
func LimitIDs(p *core.Policy) []string {
	if len(p.Limits) == 1 {
		return []string{p.Name}
	}
	ids := make([]string, len(p.Limits))
	seen := map[string]bool{}
	dup := false
	for i, l := range p.Limits {
		// the window as Limit.String writes it ("1 per 15m"): 15m, 1h30m
		ids[i] = p.Name + "-" + strings.TrimPrefix(core.Limit{Requests: 1, Window: l.Window}.String(), "1 per ")
		dup = dup || seen[ids[i]]
		seen[ids[i]] = true
	}
	if dup {
		for i := range ids {
			ids[i] = p.Name + "-" + strconv.Itoa(i)
		}
	}
	return ids
}

// AppendPolicyItem appends one IETF quota policy item, `"id";q=100;w=60`:
// q is the limit's Requests, w its window in seconds (rounded up, at
// least 1).
func AppendPolicyItem(b []byte, id string, l core.Limit) []byte {
	b = append(b, '"')
	b = append(b, id...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, l.Requests, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, WindowSeconds(l.Window), 10)
}
