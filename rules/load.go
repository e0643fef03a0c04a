package rules

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Format is a rules file's syntax.
type Format uint8

const (
	// YAML is the YAML syntax (the default for files not ending in .json).
	YAML Format = iota
	// JSON is the JSON syntax.
	JSON
)

// String returns "yaml" or "json".
func (f Format) String() string {
	if f == JSON {
		return "json"
	}
	return "yaml"
}

// MaxFileSize bounds the size of a rules file the loaders accept.
const MaxFileSize = 4 << 20

// maxErrors bounds how many problems one load reports.
const maxErrors = 20

// Error is one problem in a rules file. Loaders return every problem they
// find (up to 20) joined with [errors.Join]; use [errors.As] to get the
// first *Error, or read the message, which lists them one per line.
type Error struct {
	// Line is the 1-based line in the source, 0 when unknown.
	Line int
	// Section is "rules", "descriptors", "defaults", or "" for the file.
	Section string
	// Index is the position in the Section's list, -1 when not in a list.
	Index int
	// Name is the rule's name or the descriptor's domain/key, when known.
	Name string
	// Field is the field at fault ("limits[1]", "route"), when known.
	Field string
	// Msg says what is wrong and what to write instead.
	Msg string
}

// Error formats the problem as
// `rules: line 12: rules[2] "api2-post": limits[1]: <what to fix>`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("rules: ")
	if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Section != "" {
		b.WriteString(e.Section)
		if e.Index >= 0 {
			b.WriteString("[" + strconv.Itoa(e.Index) + "]")
		}
		if e.Name != "" {
			b.WriteString(" " + strconv.Quote(e.Name))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// switchesDoc holds the fields a rule, a descriptor and the defaults
// share. Pointers distinguish "not written" from a zero value.
type switchesDoc struct {
	Algorithm   *string     `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	Buckets     *int        `yaml:"buckets,omitempty" json:"buckets,omitempty"`
	Shadow      *bool       `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	SoftPercent *int        `yaml:"soft_percent,omitempty" json:"soft_percent,omitempty"`
	CountDenied *bool       `yaml:"count_denied,omitempty" json:"count_denied,omitempty"`
	FailMode    *string     `yaml:"fail_mode,omitempty" json:"fail_mode,omitempty"`
	Mode        *string     `yaml:"mode,omitempty" json:"mode,omitempty"`
	Sync        *string     `yaml:"sync,omitempty" json:"sync,omitempty"`
	FleetSize   *int        `yaml:"fleet_size,omitempty" json:"fleet_size,omitempty"`
	Elastic     *elasticDoc `yaml:"elastic,omitempty" json:"elastic,omitempty"`
}

type ruleDoc struct {
	Name        string     `yaml:"name" json:"name"`
	Methods     []string   `yaml:"methods,omitempty,flow" json:"methods,omitempty"`
	Route       string     `yaml:"route" json:"route"`
	Identity    string     `yaml:"identity,omitempty" json:"identity,omitempty"`
	Key         string     `yaml:"key,omitempty" json:"key,omitempty"`
	Limits      []limitDoc `yaml:"limits,omitempty,flow" json:"limits,omitempty"`
	switchesDoc `yaml:",inline"`
	policiesDoc `yaml:",inline"`
}

type descriptorDoc struct {
	Domain      string     `yaml:"domain" json:"domain"`
	Key         string     `yaml:"key" json:"key"`
	Unit        string     `yaml:"unit,omitempty" json:"unit,omitempty"`
	Requests    int64      `yaml:"requests,omitempty" json:"requests,omitempty"`
	Limits      []limitDoc `yaml:"limits,omitempty,flow" json:"limits,omitempty"`
	switchesDoc `yaml:",inline"`
}

type fileDoc struct {
	Version     int             `yaml:"version,omitempty" json:"version,omitempty"`
	Defaults    *switchesDoc    `yaml:"defaults,omitempty" json:"defaults,omitempty"`
	Rules       []ruleDoc       `yaml:"rules" json:"rules"`
	Descriptors []descriptorDoc `yaml:"descriptors,omitempty" json:"descriptors,omitempty"`
}

// limitDoc is one limit as written: the short string or the structured
// mapping {requests, window, burst}.
type limitDoc struct {
	text       string
	structured bool
	requests   int64
	window     string
	burst      int64
	line       int
}

type limitFields struct {
	Requests int64  `yaml:"requests" json:"requests"`
	Window   string `yaml:"window" json:"window"`
	Burst    int64  `yaml:"burst,omitempty" json:"burst,omitempty"`
}

// UnmarshalYAML accepts a scalar or a mapping.
func (l *limitDoc) UnmarshalYAML(n *yaml.Node) error {
	l.line = n.Line
	switch n.Kind {
	case yaml.ScalarNode:
		l.text = n.Value
		return nil
	case yaml.MappingNode:
		var f limitFields
		if err := n.Decode(&f); err != nil {
			return err
		}
		l.structured, l.requests, l.window, l.burst = true, f.Requests, f.Window, f.Burst
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(`line %d: a limit is a string ("200 per 1m") or a mapping {requests: 200, window: 1m}`, n.Line)}}
}

// MarshalYAML writes the short form.
func (l limitDoc) MarshalYAML() (any, error) { return l.text, nil }

// UnmarshalJSON accepts a string or an object.
func (l *limitDoc) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &l.text)
	}
	var f limitFields // unknown fields are reported by the first pass (jsonWalk)
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf(`a limit is a string ("200 per 1m") or an object {"requests": 200, "window": "1m"}: %w`, err)
	}
	l.structured, l.requests, l.window, l.burst = true, f.Requests, f.Window, f.Burst
	return nil
}

// MarshalJSON writes the short form.
func (l limitDoc) MarshalJSON() ([]byte, error) { return json.Marshal(l.text) }

// lines records source lines: for each rule / descriptor, its own line
// ("") and the line of each field.
type lines struct {
	defaults    map[string]int
	rules       []map[string]int
	descriptors []map[string]int
}

func lineOf(m []map[string]int, i int, field string) int {
	if i >= len(m) || m[i] == nil {
		return 0
	}
	if l, ok := m[i][field]; ok {
		return l
	}
	return m[i][""]
}

// LoadFile reads and validates a rules file: JSON when its name ends in
// ".json", YAML otherwise. It reads with [ReadFile]: only a regular file,
// of at most [MaxFileSize] bytes, within [MaxReadTime].
func LoadFile(path string) (*Set, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	format := YAML
	if strings.EqualFold(filepath.Ext(path), ".json") {
		format = JSON
	}
	s, err := Parse(data, format)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Load reads at most [MaxFileSize] bytes from r and parses them as
// [Parse] does.
func Load(r io.Reader, format Format) (*Set, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("rules: read: %w", err)
	}
	return Parse(data, format)
}

// Parse parses and validates a rules file. Unknown fields and keys written
// twice (at any depth) are errors, and every problem found (up to 20) is
// reported in line order with its line, the rule (index and name), the
// field and what to fix; see [Error]. A syntax error, or a value of the
// wrong type, ends the load before the rules are validated. Parse takes
// time and memory linear in len(data), at most [MaxFileSize].
func Parse(data []byte, format Format) (*Set, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{Index: -1, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	var (
		doc fileDoc
		ln  lines
		c   collector
		ok  bool
	)
	if format == JSON {
		ok = parseJSON(data, &doc, &ln, &c)
	} else {
		ok = parseYAML(data, &doc, &ln, &c)
	}
	var s *Set
	if ok {
		// Unknown and repeated fields do not stop here: the other problems
		// of the file are reported with them.
		s = build(&doc, &ln, &c)
	}
	if len(c.errs) > 0 {
		// in file order; problems of the whole file (no line) first
		slices.SortStableFunc(c.errs, func(a, b error) int {
			var ea, eb *Error
			errors.As(a, &ea)
			errors.As(b, &eb)
			return cmp.Compare(ea.Line, eb.Line)
		})
		return nil, c.err()
	}
	return s, nil
}

// ---- YAML ----

var (
	topKeys        = []string{"version", "defaults", "rules", "descriptors"}
	switchKeys     = []string{"algorithm", "buckets", "shadow", "soft_percent", "count_denied", "fail_mode", "mode", "sync", "fleet_size", "elastic"}
	ruleKeys       = append(append([]string{"name", "methods", "route", "identity", "key", "limits"}, switchKeys...), policiesKeys...)
	descriptorKeys = append([]string{"domain", "key", "unit", "requests", "limits"}, switchKeys...)
	limitKeys      = []string{"requests", "window", "burst"}
)

// parseYAML decodes data into doc, recording field lines in ln and
// problems in c. It reports whether doc is complete enough to build.
func parseYAML(data []byte, doc *fileDoc, ln *lines, c *collector) bool {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		c.add(yamlSyntax(err))
		return false
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		c.add(&Error{Index: -1, Msg: "empty file; write a mapping with a rules: list"})
		return false
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		c.add(&Error{Index: -1, Line: top.Line, Msg: "the file must be a mapping with a rules: list"})
		return false
	}
	w := &yamlWalk{c: c}
	w.top(top, ln)
	if w.structural {
		return false
	}
	return decodeYAML(data, doc, ln, c)
}

// yamlWalk is the first pass over a YAML rules file's node tree: unknown
// fields with their line and the rule they are in, and the line of every
// field. It covers every mapping of the schema, so the typed decode
// (decodeYAML) need not be strict.
type yamlWalk struct {
	c *collector
	// structural: a section of the wrong kind; the decode would fail on it too
	structural bool
}

// top walks the file's top-level mapping and every rule and descriptor.
func (w *yamlWalk) top(top *yaml.Node, ln *lines) {
	w.addKeys(top, topKeys, Error{Index: -1})
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i].Value, top.Content[i+1]
		switch k {
		case "defaults":
			ln.defaults = w.addKeys(v, switchKeys, Error{Section: "defaults", Index: -1})
		case "rules", "descriptors":
			if v.Kind != yaml.SequenceNode {
				w.c.add(&Error{Line: v.Line, Section: k, Index: -1, Msg: "must be a list (- name: ...)"})
				w.structural = true
				continue
			}
			for j, item := range v.Content {
				if k == "rules" {
					e := Error{Section: k, Index: j, Name: yamlNamed(item, "name")}
					ln.rules = append(ln.rules, w.addKeys(item, ruleKeys, e))
					w.checkLimits(item, e)
					checkPoliciesYAML(item, e, w.addKeys)
				} else {
					e := Error{Section: k, Index: j, Name: yamlNamed(item, "domain", "key")}
					ln.descriptors = append(ln.descriptors, w.addKeys(item, descriptorKeys, e))
					w.checkLimits(item, e)
				}
			}
		}
	}
}

// addKeys reports n's fields that are not in known, under e, and returns
// the line of each field ("" for n's own).
func (w *yamlWalk) addKeys(n *yaml.Node, known []string, e Error) map[string]int {
	m := map[string]int{"": n.Line}
	if n.Kind != yaml.MappingNode {
		e.Line, e.Msg = n.Line, "must be a mapping (field: value)"
		w.c.add(&e)
		w.structural = true
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		m[k.Value] = k.Line
		if !contains(known, k.Value) && !w.c.full() {
			e := e
			e.Line, e.Msg = k.Line, unknownField(k.Value, known)
			w.c.add(&e)
		}
	}
	return m
}

// checkLimits reports unknown fields in the structured limits of the
// entry n.
func (w *yamlWalk) checkLimits(n *yaml.Node, e Error) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "limits" || n.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for j, l := range n.Content[i+1].Content {
			if l.Kind == yaml.MappingNode {
				e := e
				e.Field = fmt.Sprintf("limits[%d]", j)
				w.addKeys(l, limitKeys, e)
			}
		}
	}
}

// yamlNamed joins the values of fields of the mapping n with '/': an
// entry's name for messages, before the typed decode.
func yamlNamed(n *yaml.Node, fields ...string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	var parts []string
	for _, f := range fields {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == f {
				parts = append(parts, n.Content[i+1].Value)
			}
		}
	}
	return strings.Join(parts, "/")
}

// decodeYAML is the second pass: the typed decode. A type error leaves
// fields zero, which would raise false problems later: it reports false
// after reporting it. (yaml reports a repeated key as a type error too.)
func decodeYAML(data []byte, doc *fileDoc, ln *lines, c *collector) bool {
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				c.add(yamlContext(msg, ln, doc))
			}
		} else {
			c.add(yamlSyntax(err))
		}
		return false
	}
	return true
}

// yamlSyntax turns "yaml: line 3: did not find ..." into an Error.
func yamlSyntax(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := yamlErrLine(msg)
	if i := strings.Index(msg, ": "); line > 0 && i >= 0 {
		msg = msg[i+2:]
	}
	return &Error{Index: -1, Line: line, Msg: msg}
}

// yamlErrLine extracts N from "yaml: line N: ...", or 0.
func yamlErrLine(msg string) int {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		return 0
	}
	msg = msg[5:]
	i := strings.IndexByte(msg, ':')
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(msg[:i])
	return n
}

// yamlContext turns a yaml type error ("line 7: cannot unmarshal ...")
// into an Error naming the rule, descriptor or section that holds the
// line: the one that starts last at or before it.
func yamlContext(msg string, ln *lines, doc *fileDoc) *Error {
	line := yamlErrLine(msg)
	e := &Error{Index: -1, Line: line, Msg: msg}
	if i := strings.Index(msg, ": "); line > 0 && i >= 0 {
		e.Msg = msg[i+2:]
	}
	bestLine := 0
	consider := func(m map[string]int, section string, index int) {
		if m == nil || m[""] > line || m[""] < bestLine {
			return
		}
		bestLine = m[""]
		e.Section, e.Index, e.Field, e.Name = section, index, "", ""
		// the field on the error's line; none when several share it (a
		// flow mapping such as {route: x, limits: y}): the line alone
		// cannot tell which, and a map's order must not pick one
		ambiguous := false
		for f, l := range m {
			if f != "" && l == line {
				ambiguous = e.Field != ""
				e.Field = f
			}
		}
		if ambiguous {
			e.Field = ""
		}
		if section == "rules" && index < len(doc.Rules) {
			e.Name = doc.Rules[index].Name
		}
	}
	consider(ln.defaults, "defaults", -1)
	for i, m := range ln.rules {
		consider(m, "rules", i)
	}
	for i, m := range ln.descriptors {
		consider(m, "descriptors", i)
	}
	return e
}

// ---- JSON ----

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

// ---- shared helpers ----

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
