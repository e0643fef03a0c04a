package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxJSONDepth bounds the nesting the JSON walk follows; the schema needs
// 4 levels, and the bound keeps a hostile "[[[[..." from growing the stack.
const maxJSONDepth = 32

// jsonWalk is the first pass over a JSON rules file: a token walk that
// finds repeated keys at any depth (encoding/json keeps the last value
// silently), unknown fields in every object of the schema, and the line of
// every field.
type jsonWalk struct {
	dec  *json.Decoder
	data []byte
	ln   *lines
	c    *collector
	// line cache: offsets only move forward, so counting lines stays linear
	off  int64
	line int
}

// at is the 1-based line holding byte offset off.
func (w *jsonWalk) at(off int64) int {
	off = min(max(off, 0), int64(len(w.data)))
	if off < w.off {
		w.off, w.line = 0, 1
	}
	w.line += bytes.Count(w.data[w.off:off], []byte{'\n'})
	w.off = off
	return w.line
}

func (w *jsonWalk) syntax(err error) *Error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	off := w.dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	return &Error{Index: -1, Line: w.at(off), Msg: fmt.Sprintf("%v (byte offset %d)", strings.TrimPrefix(err.Error(), "json: "), off)}
}

// jsonCtx says where in the schema a value is.
type jsonCtx struct {
	kind    uint8 // ctxTop, ctxDefaults, ctxEntry, ctxLimit, ctxOther
	section string
	index   int
	field   string // the limits[j] of a limit
	path    string // for messages: rules[2].limits[0]
}

const (
	ctxOther uint8 = iota
	ctxTop
	ctxDefaults
	ctxEntry // a rule or a descriptor
	ctxLimit
)

func (x *jsonCtx) known() []string {
	switch x.kind {
	case ctxTop:
		return topKeys
	case ctxDefaults:
		return switchKeys
	case ctxEntry:
		if x.section == "rules" {
			return ruleKeys
		}
		return descriptorKeys
	case ctxLimit:
		return limitKeys
	case ctxOther:
		return policiesJSONKeys(x.path)
	}
	return nil
}

// fieldLines returns the map that records the lines of x's fields, or nil.
func (w *jsonWalk) fieldLines(x *jsonCtx, line int) map[string]int {
	switch x.kind {
	case ctxDefaults:
		if w.ln.defaults == nil {
			w.ln.defaults = map[string]int{"": line}
		}
		return w.ln.defaults
	case ctxEntry:
		list := &w.ln.rules
		if x.section == "descriptors" {
			list = &w.ln.descriptors
		}
		for len(*list) <= x.index {
			*list = append(*list, nil)
		}
		if (*list)[x.index] == nil {
			(*list)[x.index] = map[string]int{"": line}
		}
		return (*list)[x.index]
	}
	return nil
}

// value walks one value. It returns false on a syntax error (reported),
// after which the walk cannot go on.
func (w *jsonWalk) value(x jsonCtx, depth int) bool {
	start := w.at(skipSpace(w.data, w.dec.InputOffset()))
	tok, err := w.dec.Token()
	if err != nil {
		w.c.add(w.syntax(err))
		return false
	}
	d, ok := tok.(json.Delim)
	if x.kind == ctxOther && (x.path == "rules" || x.path == "descriptors") && d != '[' && tok != nil { // null is an empty list
		w.c.add(&Error{Section: x.path, Index: -1, Line: start, Msg: "must be a list"})
		return false
	}
	if x.kind == ctxDefaults && d != '{' {
		w.c.add(&Error{Section: "defaults", Index: -1, Line: start, Msg: "must be an object"})
		return false
	}
	if !ok {
		if x.kind == ctxTop {
			w.c.add(&Error{Index: -1, Line: start, Msg: `the file must be an object with a "rules" list`})
			return false
		}
		return true // a scalar
	}
	if depth >= maxJSONDepth {
		w.c.add(&Error{Index: -1, Line: start, Msg: fmt.Sprintf("%s: nested deeper than %d levels", x.path, maxJSONDepth)})
		return false
	}
	if d == '[' {
		if !w.array(x, depth, start) {
			return false
		}
	} else if !w.object(x, depth, start) {
		return false
	}
	if _, err := w.dec.Token(); err != nil { // the closing delimiter
		w.c.add(w.syntax(err))
		return false
	}
	return true
}

// array walks the elements of an array whose '[' (on line start) was
// read; x is the array's context.
func (w *jsonWalk) array(x jsonCtx, depth, start int) bool {
	switch {
	case x.kind == ctxTop:
		w.c.add(&Error{Index: -1, Line: start, Msg: `the file must be an object with a "rules" list`})
		return false
	case x.kind == ctxOther && (x.path == "rules" || x.path == "descriptors"):
		x = jsonCtx{kind: ctxEntry, section: x.path}
	case x.kind == ctxOther && strings.HasSuffix(x.path, ".limits") && x.section != "":
		x = jsonCtx{kind: ctxLimit, section: x.section, index: x.index, path: x.path}
	default:
		x = jsonCtx{path: x.path}
	}
	for i := 0; w.dec.More(); i++ {
		y := x
		switch y.kind {
		case ctxEntry:
			y.index, y.path = i, fmt.Sprintf("%s[%d]", x.section, i)
		case ctxLimit:
			y.field, y.path = fmt.Sprintf("limits[%d]", i), fmt.Sprintf("%s[%d]", x.path, i)
		default:
			y.path = fmt.Sprintf("%s[%d]", x.path, i)
		}
		if !w.value(y, depth+1) {
			return false
		}
	}
	return true
}

// object walks the members of an object whose '{' (on line start) was
// read, reporting repeated and unknown keys; x is the object's context.
func (w *jsonWalk) object(x jsonCtx, depth, start int) bool {
	known := x.known()
	lines := w.fieldLines(&x, start)
	seen := map[string]int{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			w.c.add(w.syntax(err))
			return false
		}
		key, _ := tok.(string)
		line := w.at(w.dec.InputOffset())
		e := Error{Index: -1, Line: line}
		if x.kind == ctxEntry || x.kind == ctxLimit {
			e.Section, e.Index, e.Field = x.section, x.index, x.field
		} else if x.kind == ctxDefaults {
			e.Section = "defaults"
		}
		if first, dup := seen[key]; dup && !w.c.full() {
			where := ""
			if x.kind == ctxOther && x.path != "" {
				where = " in " + x.path
			}
			e.Msg = fmt.Sprintf("key %q appears twice%s (first on line %d); write each key once", key, where, first)
			w.c.add(&e)
		} else if !dup {
			seen[key] = line
			if lines != nil {
				lines[key] = line
			}
		}
		if known != nil && !contains(known, key) && !w.c.full() {
			e.Msg = unknownField(key, known)
			w.c.add(&e)
		}
		if !w.value(x.member(key), depth+1) {
			return false
		}
	}
	return true
}

// member is the context of the value of x's member key.
func (x *jsonCtx) member(key string) jsonCtx {
	y := jsonCtx{path: key, section: x.section, index: x.index}
	switch {
	case x.kind == ctxTop && key == "defaults":
		y.kind = ctxDefaults
	case x.kind == ctxEntry:
		y.path = x.path + "." + key
		if key != "limits" {
			y.section = ""
		}
	case x.kind != ctxTop:
		y.path, y.section = x.path+"."+key, ""
	}
	return y
}

// parseJSON decodes data into doc, recording field lines in ln and
// problems in c. It reports whether doc is complete enough to build.
func parseJSON(data []byte, doc *fileDoc, ln *lines, c *collector) bool {
	w := &jsonWalk{dec: json.NewDecoder(bytes.NewReader(data)), data: data, ln: ln, c: c, line: 1}
	w.dec.UseNumber()
	if !w.value(jsonCtx{kind: ctxTop}, 0) {
		return false
	}
	if _, err := w.dec.Token(); err != io.EOF {
		c.add(&Error{Index: -1, Line: w.at(w.dec.InputOffset()), Msg: "unexpected data after the top-level object"})
		return false
	}
	ok := decodeJSON(data, doc, ln, c)
	// The walk could not know names: add them to its errors.
	for _, err := range c.errs {
		if e, ok := err.(*Error); ok && e.Name == "" && e.Index >= 0 {
			switch {
			case e.Section == "rules" && e.Index < len(doc.Rules):
				e.Name = doc.Rules[e.Index].Name
			case e.Section == "descriptors" && e.Index < len(doc.Descriptors):
				e.Name = doc.Descriptors[e.Index].Domain + "/" + doc.Descriptors[e.Index].Key
			}
		}
	}
	return ok
}

// decodeJSON is the second pass: the typed decode, one section and one
// entry at a time so that a type error names its rule. Unknown fields
// were reported by the walk. A type error leaves fields zero, which would
// raise false problems later: it reports false after reporting them all.
func decodeJSON(data []byte, doc *fileDoc, ln *lines, c *collector) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	typeErrs := 0
	fail := func(e *Error) {
		typeErrs++
		c.add(e)
	}
	dec.Token() // {
	for dec.More() {
		tok, _ := dec.Token()
		key, _ := tok.(string)
		switch key {
		case "version":
			if err := dec.Decode(&doc.Version); err != nil {
				_, msg := jsonMsg(err, nil)
				fail(&Error{Index: -1, Line: lineAt(data, dec.InputOffset()), Field: "version", Msg: msg})
			}
		case "defaults":
			if err := dec.Decode(&doc.Defaults); err != nil {
				f, msg := jsonMsg(err, switchKeys)
				fail(&Error{Section: "defaults", Index: -1, Line: ln.defaults[f], Field: f, Msg: msg})
			}
		case "rules", "descriptors":
			decodeJSONEntries(dec, key, doc, ln, fail)
		default:
			var skip json.RawMessage
			dec.Decode(&skip)
		}
	}
	return typeErrs == 0
}

// decodeJSONEntries decodes the list of the section key ("rules" or
// "descriptors") into doc, one entry at a time.
func decodeJSONEntries(dec *json.Decoder, key string, doc *fileDoc, ln *lines, fail func(*Error)) {
	if tok, _ := dec.Token(); tok != json.Delim('[') {
		return // null, an empty list; the walk rejected anything else
	}
	for i := 0; dec.More(); i++ {
		var err error
		name := ""
		if key == "rules" {
			var r ruleDoc
			err = dec.Decode(&r)
			doc.Rules = append(doc.Rules, r)
			name = r.Name
		} else {
			var d descriptorDoc
			err = dec.Decode(&d)
			doc.Descriptors = append(doc.Descriptors, d)
			name = d.Domain + "/" + d.Key
		}
		if err != nil {
			m := ln.rules
			if key == "descriptors" {
				m = ln.descriptors
			}
			f, msg := jsonMsg(err, nil)
			fail(&Error{Section: key, Index: i, Name: name, Line: lineOf(m, i, f), Field: f, Msg: msg})
		}
	}
	dec.Token() // ]
}

// jsonMsg rewrites encoding/json's errors: an unknown field names the
// known ones; a type error names the field and the expected type.
func jsonMsg(err error, known []string) (field, msg string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if i := strings.LastIndexByte(f, '.'); i >= 0 {
			f = f[i+1:]
		}
		return f, fmt.Sprintf("a JSON %s is not a valid %s", te.Value, te.Type)
	}
	msg = err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if name, err := strconv.Unquote(f); err == nil {
			return "", unknownField(name, known)
		}
	}
	return "", strings.TrimPrefix(msg, "json: ")
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
		off++
	}
	return off
}

// lineAt is the 1-based line holding byte offset off.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
