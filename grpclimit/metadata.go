package grpclimit

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/metadata"

	"github.com/limitkit/limitkit/httplimit"
)

// An admitted call's header metadata, the X-RateLimit triple as a rule,
// is built without formatting or allocating: its values are slices of
// one value, capacity 1, shared between calls (the limit's per limit
// size, the remaining count's and a reset's below smallInts from one
// table, as httplimit.Engine.SetHTTP shares them in an http.Header), and
// the map itself is shared too: each Interceptor keeps the maps of the
// triples it sent last in a small direct-mapped table (mdSlots entries,
// keyed by the limit size, the remaining count and the reset value;
// atomic pointers, no lock), and hands the same map to every stream whose
// call has that triple. A shared map is never written once made: a
// different triple gets a new map, which replaces the slot's entry.
//
// So the map given to a stream's SetHeader must not be modified, as the
// maps of metadata.FromIncomingContext must not: grpc-go's own transport
// stream (v1.85: ServerStream.SetHeader, and the grpc.ServerStream of a
// streaming call) merges it into a new map with metadata.Join, copying
// its values, and keeps neither; a test stream or a wrapper may keep it.
// A map found with other than its three entries (a stream that wrote into
// it) is replaced, not sent again. TestTransportLeavesHeaderIntact checks
// grpc-go's side; TestSharedHeaderNeverRewritten ours.

// mdSlots is the number of header maps an Interceptor keeps (each about
// 450 bytes: at most 230 KB): the triples of a second's hot clients.
const (
	mdBits  = 9
	mdSlots = 1 << mdBits
)

// sharedMD is a header map kept in an Interceptor's table and the triple
// it holds. It is immutable once stored.
type sharedMD struct {
	limit      *sharedText
	rem, reset int64
	md         metadata.MD
}

// headerMD is res's header metadata for an admitted call, or nil: the
// triple's shared map (see above), or a map of its own for other fields.
func (i *Interceptor) headerMD(res *httplimit.Result) metadata.MD {
	var t httplimit.Triple
	if !i.e.Triple(res, &t) {
		return i.fieldsMD(res)
	}
	lt, shared := i.limitText(t.Limit)
	if !shared || t.Remaining < 0 || t.Remaining >= smallInts {
		// a count that seldom repeats: not worth a slot
		return tripleMap(lt, &t)
	}
	slot := &i.mds[mdSlot(lt.idx, t.Remaining, t.ResetN)]
	if e := slot.Load(); e != nil && e.limit == lt && e.rem == t.Remaining && e.reset == t.ResetN && len(e.md) == 3 {
		return e.md
	}
	md := tripleMap(lt, &t)
	slot.Store(&sharedMD{limit: lt, rem: t.Remaining, reset: t.ResetN, md: md})
	return md
}

// mdSlot is the table slot of a triple: a multiplicative hash of the
// remaining count, the reset value and the limit's index.
func mdSlot(idx int, rem, reset int64) uint64 {
	h := uint64(rem)*0x9e3779b97f4a7c15 ^ uint64(reset)*0xc2b2ae3d27d4eb4f ^ uint64(idx)*0x165667b19e3779f9
	return h >> (64 - mdBits)
}

// metadata is res's rate-limit fields as metadata, or nil: a map of its
// own, which the caller may add to (a denial's trailers).
func (i *Interceptor) metadata(res *httplimit.Result) metadata.MD {
	var t httplimit.Triple
	if i.e.Triple(res, &t) {
		lt, _ := i.limitText(t.Limit)
		return tripleMap(lt, &t)
	}
	return i.fieldsMD(res)
}

// tripleMap is a new map of the X-RateLimit triple t, whose limit's text
// is lt (see tripleVals).
func tripleMap(lt *sharedText, t *httplimit.Triple) metadata.MD {
	md := make(metadata.MD, 3)
	md[mdLimit], md[mdRemaining], md[mdReset] = tripleVals(lt, t)
	return md
}

// tripleVals is the value slices of the X-RateLimit triple t, whose
// limit's text is lt: shared slices (see above) but for a remaining count
// of smallInts or more and a reset the engine has no text for, whose
// text is one string and slices one array.
func tripleVals(lt *sharedText, t *httplimit.Triple) (limit, rem, reset []string) {
	limit = lt.vals
	rem = smallVals(t.Remaining)
	if t.Reset != "" {
		reset = resetVals(t.Reset)
	} else {
		reset = smallVals(t.ResetN)
	}
	if rem == nil || reset == nil {
		var buf [48]byte
		b := buf[:0]
		if rem == nil {
			b = strconv.AppendInt(b, t.Remaining, 10)
		}
		n := len(b)
		if reset == nil {
			b = strconv.AppendInt(b, t.ResetN, 10)
		}
		text := string(b)
		vals := new([2]string)
		if rem == nil {
			vals[0] = text[:n]
			rem = vals[0:1:1]
		}
		if reset == nil {
			vals[1] = text[n:]
			reset = vals[1:2:2]
		}
	}
	return limit, rem, reset
}

// sharedText is a value and its one-value slice (capacity 1); idx is
// a limit's place in Interceptor.limits (see limitText).
type sharedText struct {
	s    string
	vals []string
	idx  int
}

func newSharedText(s string) *sharedText {
	return &sharedText{s: s, vals: []string{s}}
}

// maxLimitTexts bounds the limit sizes an Interceptor keeps a slice for
// (the sizes of its policies' limits, a handful as a rule); another size
// has its slice made per call.
const maxLimitTexts = 16

// limitText is the shared text of the limit's size s, and whether it is
// the Interceptor's (false: made for this call, the list being full or
// another call having added s first).
func (i *Interceptor) limitText(s string) (*sharedText, bool) {
	p := i.limits.Load()
	if p != nil {
		for _, e := range *p {
			if e.s == s {
				return e, true
			}
		}
	}
	e := newSharedText(s)
	var list []*sharedText
	if p != nil {
		list = *p
	}
	if len(list) < maxLimitTexts {
		e.idx = len(list)
		next := append(list[:len(list):len(list)], e)
		// lost to another call: not shared (the next call finds the winner's)
		return e, i.limits.CompareAndSwap(p, &next)
	}
	return e, false
}

// lastReset is the slice of the reset text last sent: every call in the
// same second has the same reset, as a rule.
var lastReset atomic.Pointer[sharedText]

// resetVals is the shared slice of the reset's text s.
func resetVals(s string) []string {
	if p := lastReset.Load(); p != nil && p.s == s {
		return p.vals
	}
	e := newSharedText(s)
	lastReset.Store(e)
	return e.vals
}

// smallInts bounds the numbers smallVals has a shared slice for: the
// remaining quota of most limits (a few thousand a minute at most).
const smallInts = 10000

// smallTexts are the decimal texts of 0..smallInts-1, substrings of one
// string, made on first use (39 KB of text, 160 KB of strings).
var smallTexts = sync.OnceValue(func() []string {
	b := make([]byte, 0, 38890)
	ends := make([]int, smallInts+1)
	for n := range smallInts {
		ends[n] = len(b)
		b = strconv.AppendInt(b, int64(n), 10)
	}
	ends[smallInts] = len(b)
	text := string(b)
	v := make([]string, smallInts)
	for n := range v {
		v[n] = text[ends[n]:ends[n+1]]
	}
	return v
})

// smallVals is the shared one-value slice of n's decimal text for
// 0 <= n < smallInts, else nil.
func smallVals(n int64) []string {
	if n < 0 || n >= smallInts {
		return nil
	}
	return smallTexts()[n : n+1 : n+1]
}

// fieldsMD is res's header fields other than the plain X-RateLimit
// triple (IETF fields, retry-after, the degraded mark) as metadata, or
// nil for none.
func (i *Interceptor) fieldsMD(res *httplimit.Result) metadata.MD {
	var f httplimit.Fields
	i.e.Fields(res, &f)
	n := f.Len()
	if n == 0 {
		return nil
	}
	md := make(metadata.MD, n)
	vals := make([]string, n) // one backing array for every field's value
	// every computed value in one string: one allocation for them all
	var buf [128]byte
	b := buf[:0]
	var ends [16]int
	for j := 0; j < n && j < len(ends); j++ {
		_, dyn, _ := f.At(j)
		b = append(b, dyn...)
		ends[j] = len(b)
	}
	text := string(b)
	start := 0
	for j := 0; j < n; j++ {
		name, dyn, static := f.At(j)
		switch {
		case dyn == nil:
			vals[j] = static
		case j < len(ends):
			vals[j] = text[start:ends[j]]
		default:
			vals[j] = string(dyn)
		}
		if j < len(ends) {
			start = ends[j]
		}
		md[mdName(name)] = vals[j : j+1 : j+1]
	}
	return md
}

// mdName is the metadata key of header field name: lowercase, without
// an allocation for the fields the engine writes.
func mdName(name string) string {
	switch name {
	case "X-Ratelimit-Limit":
		return mdLimit
	case "X-Ratelimit-Remaining":
		return mdRemaining
	case "X-Ratelimit-Reset":
		return mdReset
	case "Retry-After":
		return mdRetryAfter
	}
	return strings.ToLower(name)
}
