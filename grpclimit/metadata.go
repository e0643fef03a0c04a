package grpclimit

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/limitkit/limitkit/httplimit"
)

// An admitted call's header metadata, the X-RateLimit triple as a rule,
// is built without formatting or allocating its values: the limit's,
// the reset's and a remaining count below smallInts are slices of one
// value, capacity 1, shared between calls (as httplimit.Engine.SetHTTP
// shares them in an http.Header). grpc-go's own transport copies the
// map and its values into the call's header (metadata.Join) before
// SetHeader returns, so a unary call served by it borrows a map from
// mdPool; any other stream (a test's, a wrapper's) is given a map of its
// own, which it may keep. Code that receives these maps may replace or
// delete their entries, not write into their value slices (which no
// grpc-go code does: MD.Set, MD.Append and Join make new slices).

// mdPool holds the three-entry header maps (*lentMD) lent to grpc-go's
// transport stream for the duration of its SetHeader.
var mdPool = sync.Pool{New: func() any { return &lentMD{md: make(metadata.MD, 3)} }}

// lentMD is a pooled header map and the value slices it holds: a value
// the map already holds (the limit's and the reset's, as a rule, and
// often the remaining count) is not written again.
type lentMD struct {
	md                metadata.MD
	limit, rem, reset []string
}

// set writes the X-RateLimit triple t into l.md, each value only when it
// is not the slice the map holds.
func (l *lentMD) set(i *Interceptor, t *httplimit.Triple) {
	limit, rem, reset := i.tripleVals(t)
	if !same(l.limit, limit) {
		l.md[mdLimit], l.limit = limit, limit
	}
	if !same(l.rem, rem) {
		l.md[mdRemaining], l.rem = rem, rem
	}
	if !same(l.reset, reset) {
		l.md[mdReset], l.reset = reset, reset
	}
}

// same reports whether a and b are the same one-value slice.
func same(a, b []string) bool { return len(a) == 1 && len(b) == 1 && &a[0] == &b[0] }

// setHeader writes res's header metadata to st, a unary call's
// transport stream, as grpc.SetHeader would.
func (i *Interceptor) setHeader(st grpc.ServerTransportStream, res *httplimit.Result) {
	var t httplimit.Triple
	if !i.e.Triple(res, &t) {
		if md := i.fieldsMD(res); md != nil {
			_ = st.SetHeader(md)
		}
		return
	}
	if copiesHeader(st) {
		l := mdPool.Get().(*lentMD)
		l.set(i, &t)
		_ = st.SetHeader(l.md)
		// the transport kept copies: the next call rewrites what differs
		mdPool.Put(l)
		return
	}
	md := make(metadata.MD, 3)
	i.fillTriple(md, &t)
	_ = st.SetHeader(md)
}

// metadata is res's rate-limit fields as header metadata, or nil: a map
// of its own, for a stream that may keep it.
func (i *Interceptor) metadata(res *httplimit.Result) metadata.MD {
	var t httplimit.Triple
	if i.e.Triple(res, &t) {
		md := make(metadata.MD, 3)
		i.fillTriple(md, &t)
		return md
	}
	return i.fieldsMD(res)
}

// transportStream is the package path and name of the type of grpc-go's
// own server transport stream (grpc-go v1.85: *transport.ServerStream,
// whose SetHeader merges the map it is given into a new one with
// metadata.Join, holding on to neither the map nor its values).
// TestTransportCopiesHeader checks both against a real server.
const (
	transportPkg    = "google.golang.org/grpc/internal/transport"
	transportStream = "ServerStream"
)

// streamKind is copiesHeader's answer for one stream type.
type streamKind struct {
	t      reflect.Type
	copies bool
}

// lastKind is the type copiesHeader last answered for: a server sees
// one stream type, so the answer is read without a type's name.
var lastKind atomic.Pointer[streamKind]

// copiesHeader reports whether st is grpc-go's own transport stream,
// which copies the metadata SetHeader is given; any other stream (a
// test's or a wrapper's, set with grpc.NewContextWithServerTransportStream)
// may keep the map.
func copiesHeader(st grpc.ServerTransportStream) bool {
	t := reflect.TypeOf(st)
	if k := lastKind.Load(); k != nil && k.t == t {
		return k.copies
	}
	copies := t.Kind() == reflect.Pointer && t.Elem().Name() == transportStream && t.Elem().PkgPath() == transportPkg
	lastKind.Store(&streamKind{t: t, copies: copies})
	return copies
}

// fillTriple writes the X-RateLimit triple t into md (see tripleVals).
func (i *Interceptor) fillTriple(md metadata.MD, t *httplimit.Triple) {
	md[mdLimit], md[mdRemaining], md[mdReset] = i.tripleVals(t)
}

// tripleVals is the value slices of the X-RateLimit triple t: shared
// slices (see above) but for a remaining count of smallInts or more and
// a reset the engine has no text for, whose text is one string and
// slices one array.
func (i *Interceptor) tripleVals(t *httplimit.Triple) (limit, rem, reset []string) {
	limit = i.limitVals(t.Limit)
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

// sharedText is a value and its one-value slice (capacity 1).
type sharedText struct {
	s    string
	vals []string
}

func newSharedText(s string) *sharedText {
	return &sharedText{s: s, vals: []string{s}}
}

// maxLimitTexts bounds the limit sizes an Interceptor keeps a slice for
// (the sizes of its policies' limits, a handful as a rule); another size
// has its slice made per call.
const maxLimitTexts = 16

// limitVals is the shared slice of the limit's text s.
func (i *Interceptor) limitVals(s string) []string {
	p := i.limits.Load()
	if p != nil {
		for _, e := range *p {
			if e.s == s {
				return e.vals
			}
		}
	}
	e := newSharedText(s)
	var list []*sharedText
	if p != nil {
		list = *p
	}
	if len(list) < maxLimitTexts {
		next := append(list[:len(list):len(list)], e)
		i.limits.CompareAndSwap(p, &next) // lost to another call: it made the slice
	}
	return e.vals
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
	case httplimit.FieldLimit:
		return mdLimit
	case httplimit.FieldRemaining:
		return mdRemaining
	case httplimit.FieldReset:
		return mdReset
	case httplimit.FieldRetryAfter:
		return mdRetryAfter
	}
	return strings.ToLower(name)
}
