package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Baked scripts. A script call pays for every argument (Redis makes a Lua
// string of each, and the script converts it back to a number): for the
// single-limit GCRA and fixed-window scripts, whose per-policy constants
// are three or four numbers, that was a fifth of the script's CPU. So
// those policies, the single-limit token bucket, and the multi-limit GCRA
// and fixed window, run their own copy of the script, with the constants
// written into the source: the call sends only now and the cost.
//
// The copies are shared by every policy with the same constants and
// cached in the process; the cache holds at most maxBaked of them, and
// beyond that a policy runs the template with its constants as arguments
// (the same decisions), so neither this process nor Redis's script cache
// can grow without bound, whatever policies a caller builds. Redis loads
// a copy on its first use on each shard (EVALSHA, then EVAL on NOSCRIPT).

// argTable is the line of a multi-limit template that reads the
// constants (ARGV[3] on) into the table A; a baked copy has the table
// literal instead.
const argTable = "local A = {} for k = 3, #ARGV do A[k] = tonumber(ARGV[k]) end"

// modText is the line of the multi-limit fixed-window template that
// reads each limit's modulus M (ARGV[4i+3], the last of limit i's four
// constants) as text into MT; a baked copy has the list of literals. The
// script adds M's text for a cost of 1: a Lua number argument is turned
// into text on every Redis command call.
const modText = "local MT = {} for i = 1, #KEYS do MT[i] = ARGV[4 * i + 3] end"

// maxBaked bounds the baked scripts of one process.
const maxBaked = 1024

// bakery is the process's cache of baked scripts.
var bakery = &oven{max: maxBaked}

// oven caches baked scripts, at most max of them.
type oven struct {
	sync.Mutex
	m   map[string]*script
	max int
}

// bake returns bakery.bake(name, tmpl, consts).
func bake(name string, tmpl string, consts []any) *script {
	return bakery.bake(name, tmpl, consts)
}

// bake returns tmpl (a padded single-limit script) with its arguments
// ARGV[3], ARGV[4], ... replaced by consts (ints, or strings "0"/"1" for
// a flag compared with '1'), or nil when the cache is full or tmpl uses
// an argument in a form bake does not replace. The forms are
// tonumber(ARGV[k]) (a number literal), ARGV[k] == '1' (true or false)
// and tostring(ARGV[k]) (the argument's text as a string literal: for a
// script that hands a constant to a Redis command, which converts a Lua
// number to text on every call).
func (o *oven) bake(name string, tmpl string, consts []any) *script {
	var key strings.Builder
	key.WriteString(name)
	for _, c := range consts {
		key.WriteByte(' ')
		key.WriteString(lit(c))
	}
	o.Lock()
	defer o.Unlock()
	if sc := o.m[key.String()]; sc != nil {
		return sc
	}
	if len(o.m) >= o.max {
		return nil
	}
	pairs := make([]string, 0, 4*len(consts))
	for i, c := range consts {
		arg := "ARGV[" + strconv.Itoa(i+3) + "]"
		v := lit(c)
		flag := "false"
		if v == "1" {
			flag = "true"
		}
		pairs = append(pairs, "tonumber("+arg+")", v, arg+" == '1'", flag, "tostring("+arg+")", "'"+v+"'")
	}
	src := strings.NewReplacer(pairs...).Replace(tmpl)
	if strings.Contains(tmpl, argTable) {
		// a multi-limit template reads its constants from the table A
		var b strings.Builder
		b.WriteString("local A = {")
		for i, c := range consts {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("[" + strconv.Itoa(i+3) + "] = " + lit(c))
		}
		b.WriteString("}")
		src = strings.Replace(tmpl, argTable, b.String(), 1)
	}
	if strings.Contains(src, modText) {
		var b strings.Builder
		b.WriteString("local MT = {")
		for i := 4; i < len(consts); i += 4 { // ARGV[4i+3] is consts[4i]
			if i > 4 {
				b.WriteString(", ")
			}
			b.WriteString("'" + lit(consts[i]) + "'")
		}
		b.WriteString("}")
		src = strings.Replace(src, modText, b.String(), 1)
	}
	for i := range consts {
		if strings.Contains(src, "ARGV["+strconv.Itoa(i+3)+"]") {
			// a template that uses an argument in a form bake does not
			// know: run it unbaked rather than wrong
			return nil
		}
	}
	if o.m == nil {
		o.m = make(map[string]*script)
	}
	sc := newScript(src)
	o.m[key.String()] = sc
	return sc
}

// lit is a constant as Lua source: a decimal integer or a flag.
func lit(c any) string {
	switch v := c.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case string:
		return v
	}
	return fmt.Sprint(c)
}

// all returns the scripts baked so far.
func (o *oven) all() []*script {
	o.Lock()
	defer o.Unlock()
	out := make([]*script, 0, len(o.m))
	for _, sc := range o.m {
		out = append(out, sc)
	}
	return out
}
