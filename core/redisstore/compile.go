package redisstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/limitkit/limitkit/core"
)

// compiled is what a policy needs per call, worked out once.
type compiled struct {
	p             *core.Policy
	script        *script
	nkeys         any      // the number of keys, as a string (cluster routing reads it)
	tail          []any    // the script's ARGV after now and cost
	etail         []any    // the elastic take's (an elastic policy's only)
	suffixes      []string // per-limit key suffixes
	soft          []int64  // per-limit soft overage (effective − nominal capacity)
	softE         []int64  // per-limit soft margin of the elastic take's reply (see lua_generic.go)
	hashPre       []byte   // policy name and a NUL, hashed before the key
	maxEff        int64    // the largest effective capacity over the limits
	calendarState          // a policy with calendar limits (calendar.go)
}

// capacity is a limit's bucket size (core's Limit.capacity).
func capacity(l core.Limit) int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Requests
}

// effective is n raised by the soft percentage (core's effective).
func effective(n int64, soft int) int64 {
	if soft == 0 {
		return n
	}
	return n * int64(100+soft) / 100
}

// algoLetters name each algorithm's keys. The fixed window's is 'w' since
// its value became count × 2^33 + index (it was 'f' with index × 10^9 +
// count): a server of the earlier layout and one of this share no
// fixed-window key, so neither misreads the other's (counts restart once
// at the upgrade).
var algoLetters = [...]byte{'g', 't', 'w', 'l', 'c'}

// compile works out once what a policy needs per call: the per-limit
// figures and key layout, the script that decides it, and that script's
// ARGV after now and cost.
func (s *redisStore) compile(p *core.Policy) (*compiled, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	figs := figuresOf(p)
	c := &compiled{p: p, nkeys: strconv.Itoa(len(p.Limits))}
	c.layout(p, figs)
	cd := countDenied(p)
	sh := shapeOf(p)
	if c.cal, c.core = calendarLimits(p); c.cal != nil {
		sh = shapeGeneric // only the generic fixed-window script reads periods
	}
	switch sh {
	case shapeElasticGCRA1:
		c.script = gcra1E
		c.tail, c.etail = figs[0].gcra1E(modeTake), figs[0].gcra1E(modeElastic)
	case shapeElasticFixedWindow1:
		c.script = fixedWindow1E
		c.tail, c.etail = figs[0].fixedWindow1E(modeTake), figs[0].fixedWindow1E(modeElastic)
	case shapeSingle:
		c.script, c.tail = single[p.Algorithm], figs[0].single(p, cd)
		c.script, c.tail = baked(string(algoLetters[p.Algorithm]), bakeable[p.Algorithm], c.script, c.tail)
	case shapeMulti:
		c.script, c.tail = multi[p.Algorithm], multiArgs(p, figs, cd)
		c.script, c.tail = baked("multi-"+string(algoLetters[p.Algorithm]), bakeableMulti[p.Algorithm], c.script, c.tail)
	default:
		c.script = generic[p.Algorithm]
		c.tail, c.etail = s.genericArgs(p, figs, cd)
	}
	c.hashPre = append(c.hashPre, p.Name...)
	c.hashPre = append(c.hashPre, 0)
	return c, nil
}

// figures are one limit's numbers, worked out once.
type figures struct {
	window   int64 // µs
	interval int64 // emission interval T, µs (GCRA, token bucket)
	capa     int64 // nominal capacity
	eff      int64 // capacity raised by the soft percentage
	soft     int64 // eff − capa
	ceil     int64 // elastic ceiling; eff for a hard policy
	softE    int64 // soft margin of the elastic take's reply (see lua_generic.go)
	buckets  int64 // sliding counter's buckets (at least 1)
}

// figuresOf is the figures of each of p's limits.
func figuresOf(p *core.Policy) []figures {
	figs := make([]figures, len(p.Limits))
	for i, l := range p.Limits {
		f := &figs[i]
		f.window, f.interval = l.Window.Microseconds(), core.EmissionInterval(l)
		f.capa = capacity(l)
		f.eff = effective(f.capa, p.SoftPercent)
		f.soft, f.ceil = f.eff-f.capa, f.eff
		if p.Elastic != nil {
			f.ceil = f.capa * int64(p.Elastic.CeilingPercent) / 100
		}
		f.softE = f.ceil - f.capa
		if p.Algorithm == core.TokenBucket {
			f.softE = f.soft // the elastic take overdraws the same bucket
		}
		f.buckets = int64(max(p.Buckets, 1))
	}
	return figs
}

// layout fills the per-limit key suffixes and soft margins and the
// largest ceiling, which the replies are decoded with.
func (c *compiled) layout(p *core.Policy, figs []figures) {
	for i, f := range figs {
		c.suffixes = append(c.suffixes, suffix(p, i))
		c.soft = append(c.soft, f.soft)
		c.softE = append(c.softE, f.softE)
		c.maxEff = max(c.maxEff, f.ceil)
	}
}

// shape is which family of scripts decides a policy.
type shape uint8

const (
	shapeGeneric             shape = iota // any policy: the generic scripts
	shapeElasticGCRA1                     // elastic, one GCRA limit: gcra1E
	shapeElasticFixedWindow1              // elastic, one fixed-window limit: fixedWindow1E
	shapeSingle                           // hard, one limit: single[algorithm]
	shapeMulti                            // hard, several limits: multi[algorithm]
)

// shapeOf chooses p's script family. Elastic policies take the generic
// scripts, which decide the ceiling in the same call, except the common
// one-limit GCRA and fixed-window shapes, which have their own
// straight-line scripts.
func shapeOf(p *core.Policy) shape {
	one := len(p.Limits) == 1
	switch {
	case p.Elastic != nil && one && p.Algorithm == core.GCRA:
		return shapeElasticGCRA1
	case p.Elastic != nil && one && p.Algorithm == core.FixedWindow:
		return shapeElasticFixedWindow1
	case p.Elastic != nil:
		return shapeGeneric
	case one && single[p.Algorithm] != nil:
		return shapeSingle
	case !one && multi[p.Algorithm] != nil:
		return shapeMulti
	}
	return shapeGeneric
}

// The elastic mode argument of the scripts that decide a ceiling.
const (
	modeHard    = "0" // a hard policy (generic scripts only)
	modeTake    = "1" // an elastic policy's ordinary take
	modeElastic = "2" // the elastic take, against the ceiling
)

// countDenied is ARGV's count-denied flag: "1" when denied requests
// count (Policy.CountDenied).
func countDenied(p *core.Policy) string {
	if p.CountDenied {
		return "1"
	}
	return "0"
}

// Each builder below returns a script's ARGV after now and cost in the
// order its comment in lua_generic.go lists them.

// gcra1E is gcra1E's: T, capacity × T, ceiling × T, mode.
func (f figures) gcra1E(mode string) []any {
	return []any{f.interval, f.capa * f.interval, f.ceil * f.interval, mode}
}

// fixedWindow1E is fixedWindow1E's: W, capacity, ceiling, M, mode.
func (f figures) fixedWindow1E(mode string) []any {
	return []any{f.window, f.capa, f.ceil, fwModulus(f.ceil), mode}
}

// single is single[p.Algorithm]'s (luaGCRA1, luaTokenBucket1, …).
func (f figures) single(p *core.Policy, cd string) []any {
	switch p.Algorithm {
	case core.GCRA:
		return []any{f.interval, f.eff * f.interval, cd}
	case core.TokenBucket:
		return []any{f.interval, f.eff, cd}
	case core.FixedWindow:
		return []any{f.window, f.eff, cd, fwModulus(f.eff)}
	case core.SlidingWindowLog:
		return []any{f.window, f.eff, cd}
	case core.SlidingWindowCounter:
		width := counterWidth(f.eff)
		format := "<i8" + strings.Repeat("I"+strconv.FormatInt(width, 10), int(f.buckets)+1)
		return []any{f.buckets, f.window / f.buckets, f.eff, width, cd, format}
	}
	return nil
}

// multiArgs is multi[p.Algorithm]'s: count denied, then per limit GCRA's
// T, eff × T, soft or the fixed window's W, eff, soft, M.
func multiArgs(p *core.Policy, figs []figures, cd string) []any {
	tail := []any{cd}
	for _, f := range figs {
		switch p.Algorithm {
		case core.GCRA:
			tail = append(tail, f.interval, f.eff*f.interval, f.soft)
		case core.FixedWindow:
			tail = append(tail, f.window, f.eff, f.soft, fwModulus(f.eff))
		}
	}
	return tail
}

// genericArgs is generic[p.Algorithm]'s: count denied, TTL pad, mode,
// then each limit's row (genericRow); for an elastic policy also the
// elastic take's, which differs in the mode alone.
func (s *redisStore) genericArgs(p *core.Policy, figs []figures, cd string) (tail, etail []any) {
	mode := modeHard
	if p.Elastic != nil {
		mode = modeTake
	}
	tail = []any{cd, s.ttlPad, mode}
	for _, f := range figs {
		tail = f.genericRow(p.Algorithm, tail)
	}
	if p.Elastic != nil {
		etail = append([]any(nil), tail...)
		etail[2] = modeElastic
	}
	return tail, etail
}

// genericRow appends the limit's STRIDE numbers of the generic script of
// algorithm a to tail.
func (f figures) genericRow(a core.Algorithm, tail []any) []any {
	switch a {
	case core.GCRA:
		return append(tail, f.interval, f.eff*f.interval, f.soft, f.ceil*f.interval, f.softE)
	case core.TokenBucket:
		return append(tail, f.interval, f.eff, f.soft, f.ceil-f.eff)
	case core.FixedWindow:
		// then a calendar limit's periods, filled in per call (tailAt)
		return append(tail, f.window, f.eff, f.soft, fwModulus(f.ceil), f.ceil, f.softE, zero, zero, zero, zero, zero, zero)
	case core.SlidingWindowLog:
		return append(tail, f.window, f.eff, f.soft, f.ceil, f.softE)
	case core.SlidingWindowCounter:
		return append(tail, f.buckets, f.window/f.buckets, f.eff, f.soft, counterWidth(f.ceil), f.ceil, f.softE)
	}
	return tail
}

// zero is a calendar number of a duration window's row.
var zero any = int64(0)

// baked is sc with tail written into a copy of its template tmpl (then
// with no tail), or sc and tail as given when tmpl is "" or the bakery
// declines.
func baked(name, tmpl string, sc *script, tail []any) (*script, []any) {
	if tmpl == "" {
		return sc, tail
	}
	if b := bake(name, tmpl, tail); b != nil {
		return b, nil
	}
	return sc, tail
}

// fwModulus is the M of a fixed-window limit's stored value count × M +
// window index mod M (see luaFixedWindow): 2^33, core's, unless the
// largest value an INCRBY can make, (2 × capacity + 2) × M (a count at
// the capacity plus a cost clamped to capacity + 1), would pass 2^53,
// where Lua's doubles stop being exact; then the largest power of two
// that keeps it below.
func fwModulus(capa int64) int64 {
	m := int64(1) << 33
	for (2*capa + 2) > (int64(1)<<53)/m {
		m >>= 1
	}
	return m
}

// counterWidth is the bytes per sliding-counter bucket count: the
// smallest of 1, 2 and 4 that holds the capacity.
func counterWidth(capa int64) int64 {
	switch {
	case capa <= 0xff:
		return 1
	case capa <= 0xffff:
		return 2
	}
	return 4
}
