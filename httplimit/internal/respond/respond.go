// Package respond formats what every limitkit adapter writes: the
// X-RateLimit-* and IETF RateLimit header values, Retry-After, and the
// default problem+json bodies, for httplimit's engine, the one package
// that imports it: adapters read the values through httplimit, so that
// nethttp, ginlimit, echolimit and fiberlimit answer byte for byte alike.
//
// Values are formatted into caller-provided fixed buffers ([Fields]), small
// counts and limit sizes come ready-made ([Itoa]): nothing here allocates
// on the request path but [SetHTTP]'s one block of header values.
package respond

import (
	"encoding/binary"
	"math/bits"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/limitkit/limitkit/core"
)

// Header names, in the canonical form net/http and fasthttp store them
// (textproto.CanonicalMIMEHeaderKey("X-RateLimit-Limit") is
// "X-Ratelimit-Limit"). Header lookups are case-insensitive, so clients
// reading X-RateLimit-Limit find them.
const (
	HeaderLimit      = "X-Ratelimit-Limit"
	HeaderRemaining  = "X-Ratelimit-Remaining"
	HeaderReset      = "X-Ratelimit-Reset"
	HeaderRetryAfter = "Retry-After"
	// HeaderPolicy and HeaderRateLimit are the IETF fields of
	// draft-ietf-httpapi-ratelimit-headers-10.
	HeaderPolicy    = "Ratelimit-Policy"
	HeaderRateLimit = "Ratelimit"
	// ContentTypeProblem is the RFC 9457 media type of the default bodies.
	ContentTypeProblem = "application/problem+json"
)

// MaxFields bounds the header fields one decision writes.
const MaxFields = 8

// Fields is a small, fixed-capacity list of header fields. Numeric values
// are formatted into an inline buffer; long constant values (the
// RateLimit-Policy list) are kept as string references. The zero value is
// empty and ready to use; a Fields is meant to live on the stack for one
// request, and nothing in it points into itself, so it stays there.
type Fields struct {
	n       int
	used    int
	names   [MaxFields]string
	statics [MaxFields]string
	starts  [MaxFields]uint16
	ends    [MaxFields]uint16
	buf     [200]byte
}

// Len is the number of fields.
func (f *Fields) Len() int { return f.n }

// At returns field i: its canonical name and its value, either formatted
// (dyn, aliasing f: copy it before f changes) or constant (static).
// Exactly one of dyn and static is non-empty.
func (f *Fields) At(i int) (name string, dyn []byte, static string) {
	if f.statics[i] != "" {
		return f.names[i], nil, f.statics[i]
	}
	return f.names[i], f.buf[f.starts[i]:f.ends[i]], ""
}

// Get returns the value of the named field as a string (it allocates; for
// tests and custom denial handlers) and whether it is present.
func (f *Fields) Get(name string) (string, bool) {
	for i := 0; i < f.n; i++ {
		if f.names[i] == name {
			_, d, s := f.At(i)
			if s != "" {
				return s, true
			}
			return string(d), true
		}
	}
	return "", false
}

// room returns the free part of the buffer as a zero-length slice whose
// capacity ends at the buffer's end, or false when fewer than need bytes
// are left or no field slot is free.
func (f *Fields) room(need int) ([]byte, bool) {
	if f.n == MaxFields || len(f.buf)-f.used < need {
		return nil, false
	}
	return f.buf[f.used:f.used:len(f.buf)], true
}

func (f *Fields) commit(name string, n int) {
	f.names[f.n] = name
	f.statics[f.n] = ""
	f.starts[f.n] = uint16(f.used)
	f.used += n
	f.ends[f.n] = uint16(f.used)
	f.n++
}

// SmallInts is the number of small integers whose decimal form is kept
// ready-made: [Fields.AddInt] of 0..SmallInts-1 formats nothing.
const SmallInts = 1024

// smallInts are the decimal forms of 0..SmallInts-1, as substrings of one
// string (one allocation at start-up).
var smallInts = func() (s [SmallInts]string) {
	var all []byte
	var ends [SmallInts]int
	for i := range s {
		all = strconv.AppendInt(all, int64(i), 10)
		ends[i] = len(all)
	}
	str, start := string(all), 0
	for i := range s {
		s[i], start = str[start:ends[i]], ends[i]
	}
	return s
}()

// Itoa is strconv.FormatInt(v, 10), without allocating for
// 0 <= v < SmallInts. For values computed once (a limit's size).
func Itoa(v int64) string {
	if v >= 0 && v < SmallInts {
		return smallInts[v]
	}
	return strconv.FormatInt(v, 10)
}

// AddInt appends a field with an integer value. Values 0..SmallInts-1 are
// added as constants (nothing formatted, nothing copied by [SetHTTP]).
func (f *Fields) AddInt(name string, v int64) {
	if v >= 0 && v < SmallInts {
		f.AddStatic(name, smallInts[v])
		return
	}
	if f.n == MaxFields || len(f.buf)-f.used < 20 {
		return
	}
	f.commit(name, putInt(f.buf[f.used:f.used+20], v))
}

// pow10 are the powers of ten that fit a uint64.
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// IntText is the decimal form of v: ready-made (a constant) for
// 0 <= v < SmallInts, else written into buf (not necessarily at its
// start), which must hold 20 bytes; the result aliases buf then.
func IntText(buf []byte, v int64) []byte {
	if v >= 0 && v < SmallInts {
		s := smallInts[v]
		return StringBytes(s)
	}
	if v >= SmallInts && v < 1e16 && len(buf) >= 16 {
		// eight digits per step (put16Digits), as SetHTTPTriple formats
		// a remaining count: a 10-digit count is what a large limit gives
		i := put16Digits((*[16]byte)(buf[:16]), uint64(v))
		return buf[i:16]
	}
	return buf[:putInt(buf, v)]
}

// putInt writes the decimal form of v at the start of dst (at least 20
// bytes) and returns its length: AppendInt's digits, written in place from
// the last one, where AppendInt formats into a scratch buffer and copies.
func putInt(dst []byte, v int64) int {
	u := uint64(v)
	neg := 0
	if v < 0 {
		dst[0] = '-'
		u = -u // two's complement: also right for math.MinInt64
		neg = 1
	}
	// digits: log10 from the bit length, corrected by one comparison
	n := (bits.Len64(u) * 1233) >> 12
	if n < len(pow10) && u >= pow10[n] {
		n++
	}
	if n == 0 {
		n = 1
	}
	d := dst[neg : neg+n]
	i := n
	for u >= 10000 {
		q := u / 10000
		r := uint32(u - q*10000)
		u = q
		hi, lo := r/100, r%100
		i -= 4
		d[i], d[i+1] = digits2[hi*2], digits2[hi*2+1]
		d[i+2], d[i+3] = digits2[lo*2], digits2[lo*2+1]
	}
	r := uint32(u)
	if r >= 100 {
		lo := r % 100
		r /= 100
		i -= 2
		d[i], d[i+1] = digits2[lo*2], digits2[lo*2+1]
	}
	if r >= 10 {
		i -= 2
		d[i], d[i+1] = digits2[r*2], digits2[r*2+1]
	} else {
		i--
		d[i] = byte('0' + r)
	}
	return neg + n
}

// digits2 is "00".."99", for formatting two digits per lookup.
const digits2 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// AppendInt is strconv.AppendInt(b, v, 10), four digits per division: the
// header values are 10-digit counts and Unix times, which it formats in
// about two thirds of strconv's time.
func AppendInt(b []byte, v int64) []byte {
	var buf [20]byte
	return append(b, buf[:putInt(buf[:], v)]...)
}

// epochText is a Unix time in seconds and its decimal form, cached by
// [Fields.AddEpoch]; stamp is the second (of the caller's clock) in which
// the entry was made, and n how many entries were made in that second.
type epochText struct {
	sec, stamp int64
	n          int
	s          string
	vals       []string // s as a header value: one element, capacity 1 (see SetHTTPTriple)
}

// epochUpdates bounds the cache entries made per second: enough for a
// hot client whose GCRA reset runs ahead of the clock by several seconds
// a second (one client sending far above its rate), few enough that the
// entries cost nothing (at most that many pairs of small allocations a
// second).
const epochUpdates = 32

// lastEpoch is the epoch value written last: one entry, replaced at most
// epochUpdates times per second of the callers' clock, so the cache costs
// at most that many small allocations per second whatever the traffic.
// Entries are immutable.
var lastEpoch atomic.Pointer[epochText]

// AddEpoch appends a field whose value is the Unix time sec (an
// X-RateLimit-Reset instant) at the caller's current second nowSec. The
// value is what [Fields.AddInt] writes; when it is the one written last
// (a hot key, or every key of a fixed window, resets at the same second)
// its decimal form comes ready-made from a shared cache and is added as a
// constant: nothing formatted, nothing copied by [SetHTTP]. On a miss it
// replaces the cache entry, unless the entry was already replaced
// epochUpdates times this second: then it is formatted into f.
func (f *Fields) AddEpoch(name string, sec, nowSec int64) {
	if s := EpochString(sec, nowSec); s != "" {
		f.AddStatic(name, s)
		return
	}
	f.AddInt(name, sec)
}

// EpochString is the decimal form of the Unix time sec from the cache of
// [Fields.AddEpoch] (making an entry when the budget allows), or "" when
// the caller must format it.
func EpochString(sec, nowSec int64) string {
	p := lastEpoch.Load()
	if p != nil && p.sec == sec {
		return p.s
	}
	n := 1
	if p != nil && p.stamp == nowSec {
		n = p.n + 1
	}
	if sec < 0 || n > epochUpdates {
		return ""
	}
	e := &epochText{sec: sec, stamp: nowSec, n: n, s: strconv.FormatInt(sec, 10)}
	e.vals = []string{e.s}
	lastEpoch.Store(e)
	return e.s
}

// AddStatic appends a field with a constant value, which is referenced,
// not copied. An empty value is ignored.
func (f *Fields) AddStatic(name, v string) {
	if f.n == MaxFields || v == "" {
		return
	}
	f.names[f.n] = name
	f.statics[f.n] = v
	f.starts[f.n], f.ends[f.n] = uint16(f.used), uint16(f.used)
	f.n++
}

// AddRateLimit appends the IETF RateLimit field `"id";r=remaining` and,
// when t >= 0, `;t=t`. ids longer than 100 bytes are not written.
func (f *Fields) AddRateLimit(id string, remaining, t int64) {
	if len(id) > 100 {
		return
	}
	b, ok := f.room(len(id) + 48)
	if !ok {
		return
	}
	b = append(b, '"')
	b = append(b, id...)
	b = append(b, `";r=`...)
	b = AppendInt(b, remaining)
	if t >= 0 {
		b = append(b, ";t="...)
		b = AppendInt(b, t)
	}
	f.commit(HeaderRateLimit, len(b))
}

// CeilSeconds is d rounded up to whole seconds; 0 for d <= 0. It cannot
// overflow (core.Never gives 9223372037).
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RetryAfterSeconds is the Retry-After value for a denial: the core's exact
// RetryAfter rounded up to whole seconds, at least 1, so a client that waits
// that long is admitted (RFC 9110 delay-seconds). ok is false for
// core.Never (no wait helps: the cost exceeds the limit's capacity) and for
// a non-positive RetryAfter; no Retry-After is sent then.
func RetryAfterSeconds(d time.Duration) (secs int64, ok bool) {
	if d <= 0 || d == core.Never {
		return 0, false
	}
	s := CeilSeconds(d)
	if s < 1 {
		s = 1
	}
	return s, true
}

// maxEpochOffset caps the reset instant so that Unix seconds never overflow.
const maxEpochOffset = 100 * 366 * 24 * time.Hour

// EpochSeconds is the Unix time, in whole seconds rounded up, of now + d:
// the instant at which a quota that resets in d is full again. now counts
// in whole microseconds, as the stores decide (now.UnixMicro(), the Redis
// server's TIME): a reset that falls on a second (a calendar period's
// midnight, a fixed window's boundary) is that second, not the next one
// because of the reading's nanoseconds.
func EpochSeconds(now time.Time, d time.Duration) int64 {
	d = min(max(d, 0), maxEpochOffset)
	ns := int64(now.Nanosecond())/1000*1000 + int64(d) // below 2^63: one division
	sec := now.Unix() + ns/int64(time.Second)
	if ns%int64(time.Second) != 0 {
		sec++
	}
	return sec
}

// WindowSeconds is the IETF w parameter for a window: whole seconds rounded
// up, at least 1 (the draft has no sub-second windows).
func WindowSeconds(w time.Duration) int64 {
	s := CeilSeconds(w)
	if s < 1 {
		s = 1
	}
	return s
}

// SetHTTP writes f into h (net/http, gin and echo share http.Header),
// replacing earlier values of the same names. Names must be canonical.
//
// Every field's value slice, and the bytes of the formatted values, share
// one allocation when there are at most four fields holding at most
// httpData formatted bytes (the X-RateLimit-* triple plus Retry-After;
// smaller blocks for the triple alone); more cost a second.
func SetHTTP(h http.Header, f *Fields) {
	n := f.n
	if n == 0 {
		return
	}
	var vals []string
	var data []byte
	switch {
	case n <= len(httpBlock3s{}.vals) && f.used <= len(httpBlock3s{}.data):
		blk := new(httpBlock3s)
		vals, data = blk.vals[:n], blk.data[:f.used]
	case n <= len(httpBlock3{}.vals) && f.used <= len(httpBlock3{}.data):
		blk := new(httpBlock3)
		vals, data = blk.vals[:n], blk.data[:f.used]
	case n <= len(httpBlock{}.vals) && f.used <= len(httpBlock{}.data):
		blk := new(httpBlock)
		vals, data = blk.vals[:n], blk.data[:f.used]
	default:
		vals, data = make([]string, n), make([]byte, f.used)
	}
	copy(data, f.buf[:f.used])
	for i := 0; i < n; i++ {
		if s := f.statics[i]; s != "" {
			vals[i] = s
		} else {
			vals[i] = BytesString(data[f.starts[i]:f.ends[i]])
		}
		h[f.names[i]] = vals[i : i+1 : i+1]
	}
}

// Values is v as a header value that can be shared between responses:
// a one-element slice of capacity 1, so that http.Header.Add appends to
// a copy. [SetHTTPTriple] stores such slices in the header map itself
// rather than a copy per response; net/http, gin and echo (and
// http.Header's methods) replace a field's slice, never write into it.
func Values(v string) []string { return []string{v}[0:1:1] }

// SetHTTPTriple writes the X-RateLimit triple into h, as [SetHTTP] of a
// Fields holding HeaderLimit = limit[0], HeaderRemaining = remaining and
// HeaderReset = reset (or, when reset is "", resetN) writes it, in at
// most one allocation and without the Fields: the common response's
// headers. limit is the limit's text as [Values] gives it, stored as is:
// it must not be empty.
//
// Values that are the same for many responses are not copied per
// response: the limit's slice, a ready-made reset's (the one
// [EpochString] gave, whose cache entry holds its slice) and a
// remaining count below [SmallInts] (a slice of the ready-made texts)
// are stored as shared slices of capacity 1. A response then allocates
// only for a larger remaining count, 32 bytes.
func SetHTTPTriple(h http.Header, limit []string, remaining int64, reset string, resetN int64) {
	if reset != "" {
		if p := lastEpoch.Load(); p != nil && sameString(p.s, reset) {
			// the common response: shared limit and reset values, the
			// remaining count ready-made or formatted into a small block
			var rem []string
			if remaining >= 0 && remaining < SmallInts {
				rem = smallInts[remaining : remaining+1 : remaining+1]
			} else if remaining >= SmallInts && remaining < 1e16 {
				blk := newRemBlock()
				i := put16Digits(&blk.data, uint64(remaining))
				blk.vals[0] = BytesString(blk.data[i:])
				rem = blk.vals[:]
			}
			if rem != nil {
				h[HeaderLimit] = limit
				h[HeaderRemaining] = rem
				h[HeaderReset] = p.vals
				return
			}
		}
	}
	setHTTPTriple(h, limit[0], remaining, reset, resetN)
}

// put16Digits writes the decimal form of u (0 < u < 1e16) right-aligned
// in d, behind leading zeros, and returns where it starts. The digits
// are computed eight at a time in the lanes of a 64-bit word (SWAR:
// two 4-digit halves, each split into two pairs, each pair into two
// digits, by multiplications that divide every lane at once), about a
// third of the instructions of a division per pair.
func put16Digits(d *[16]byte, u uint64) int {
	hi, lo := eightDigits(u/1e8), eightDigits(u%1e8)
	binary.LittleEndian.PutUint64(d[:8], hi|0x3030303030303030)
	binary.LittleEndian.PutUint64(d[8:], lo|0x3030303030303030)
	// leading zeros: the zero bytes at the start, the low ones of hi
	if hi != 0 {
		return bits.TrailingZeros64(hi) / 8
	}
	return 8 + bits.TrailingZeros64(lo)/8
}

// eightDigits is x (< 1e8) as eight decimal digits (values 0..9, not
// yet ASCII), the most significant in the low byte: the order they take
// in memory when stored little-endian.
func eightDigits(x uint64) uint64 {
	// two 4-digit halves in 32-bit lanes, the high half first
	v := x/10000 | x%10000<<32
	// each half (< 10000) / 100 by 10486/2^20, exact below 10000; the
	// shift drags the high lane's bits into the low lane above bit 11,
	// which the mask drops
	q := (v * 10486 >> 20) & 0x0000007F0000007F
	v = q | (v-q*100)<<16 // pairs in 16-bit lanes
	// each pair (< 100) / 10 by 103/2^10, exact below 100
	q = (v * 103 >> 10) & 0x000F000F000F000F
	return q | (v-q*10)<<8
}

// remBlock is one formatted header value and its bytes, in one 32-byte
// allocation.
type remBlock struct {
	vals [1]string
	data [16]byte
}

// setHTTPTriple is SetHTTPTriple with every value in one new block: for
// a reset not from the cache or a remaining count out of the fast path's
// range.
func setHTTPTriple(h http.Header, limit string, remaining int64, reset string, resetN int64) {
	var tmp [40]byte
	used := 0
	rem := ""
	if remaining >= 0 && remaining < SmallInts {
		rem = smallInts[remaining]
	} else {
		used = putInt(tmp[:20], remaining)
	}
	remEnd := used
	if reset == "" {
		if resetN >= 0 && resetN < SmallInts {
			reset = smallInts[resetN]
		} else {
			used += putInt(tmp[used:used+20], resetN)
		}
	}
	var vals []string
	var data []byte
	switch {
	case used <= len(httpBlock3s{}.data):
		blk := new(httpBlock3s)
		vals, data = blk.vals[:], blk.data[:used]
	case used <= len(httpBlock3{}.data):
		blk := new(httpBlock3)
		vals, data = blk.vals[:], blk.data[:used]
	default:
		blk := new(httpBlock)
		vals, data = blk.vals[:3], blk.data[:used]
	}
	copy(data, tmp[:used])
	if rem == "" {
		rem = BytesString(data[:remEnd])
	}
	if reset == "" {
		reset = BytesString(data[remEnd:])
	}
	vals[0], vals[1], vals[2] = limit, rem, reset
	h[HeaderLimit] = vals[0:1:1]
	h[HeaderRemaining] = vals[1:2:2]
	h[HeaderReset] = vals[2:3:3]
}

// httpData is the formatted bytes an httpBlock holds: two 20-digit values
// and a Retry-After.
const httpData = 48

// httpBlock3 is httpBlock for the common response, the X-RateLimit triple
// with two formatted values of at most 12 digits (the limit is a constant):
// 72 bytes, an 80-byte size class where httpBlock takes 112.
type httpBlock3 struct {
	vals [3]string
	data [24]byte
}

// httpBlock3s is httpBlock3 for the triple with one formatted value of at
// most 16 digits (the limit is a constant, the reset epoch came from
// AddEpoch's cache): 64 bytes, the next smaller size class, which
// allocates and clears in about four fifths of httpBlock3's time.
type httpBlock3s struct {
	vals [3]string
	data [16]byte
}

// httpBlock holds the value slices of up to four header fields and the
// bytes of their formatted values in one allocation. The bytes are written
// once, before any string refers to them, and never again: the strings are
// immutable as Go requires.
type httpBlock struct {
	vals [4]string
	data [httpData]byte
}
