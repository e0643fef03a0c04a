package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	Algorithm   *string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	Buckets     *int    `yaml:"buckets,omitempty" json:"buckets,omitempty"`
	Shadow      *bool   `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	SoftPercent *int    `yaml:"soft_percent,omitempty" json:"soft_percent,omitempty"`
	CountDenied *bool   `yaml:"count_denied,omitempty" json:"count_denied,omitempty"`
	FailMode    *string `yaml:"fail_mode,omitempty" json:"fail_mode,omitempty"`
}

type ruleDoc struct {
	Name        string     `yaml:"name" json:"name"`
	Methods     []string   `yaml:"methods,omitempty,flow" json:"methods,omitempty"`
	Route       string     `yaml:"route" json:"route"`
	Identity    string     `yaml:"identity,omitempty" json:"identity,omitempty"`
	Key         string     `yaml:"key,omitempty" json:"key,omitempty"`
	Limits      []limitDoc `yaml:"limits,flow" json:"limits"`
	switchesDoc `yaml:",inline"`
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
	var f limitFields
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
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
// ".json", YAML otherwise.
func LoadFile(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	format := YAML
	if strings.EqualFold(filepath.Ext(path), ".json") {
		format = JSON
	}
	s, err := Load(f, format)
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

// Parse parses and validates a rules file. Unknown fields are errors, and
// every problem found is reported with its line, the rule (index and
// name), the field and what to fix; see [Error].
func Parse(data []byte, format Format) (*Set, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{Index: -1, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	var (
		doc fileDoc
		ln  lines
		err error
	)
	if format == JSON {
		err = parseJSON(data, &doc, &ln)
	} else {
		err = parseYAML(data, &doc, &ln)
	}
	if err != nil {
		return nil, err
	}
	return build(&doc, &ln)
}

// ---- YAML ----

var (
	topKeys        = []string{"version", "defaults", "rules", "descriptors"}
	switchKeys     = []string{"algorithm", "buckets", "shadow", "soft_percent", "count_denied", "fail_mode"}
	ruleKeys       = append([]string{"name", "methods", "route", "identity", "key", "limits"}, switchKeys...)
	descriptorKeys = append([]string{"domain", "key", "unit", "requests", "limits"}, switchKeys...)
	limitKeys      = []string{"requests", "window", "burst"}
)

func parseYAML(data []byte, doc *fileDoc, ln *lines) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlSyntax(err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return &Error{Index: -1, Msg: "empty file; write a mapping with a rules: list"}
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return &Error{Index: -1, Line: top.Line, Msg: "the file must be a mapping with a rules: list"}
	}
	// First pass over the node tree: unknown fields with their line and the
	// rule they are in, and the line of every field.
	var errs []error
	addKeys := func(n *yaml.Node, known []string, e Error) map[string]int {
		m := map[string]int{"": n.Line}
		if n.Kind != yaml.MappingNode {
			e.Line, e.Msg = n.Line, "must be a mapping (field: value)"
			errs = append(errs, &e)
			return m
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			m[k.Value] = k.Line
			if !contains(known, k.Value) {
				e := e
				e.Line, e.Msg = k.Line, unknownField(k.Value, known)
				errs = append(errs, &e)
			}
		}
		return m
	}
	named := func(n *yaml.Node, fields ...string) string {
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
	checkLimits := func(n *yaml.Node, e Error) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value != "limits" || n.Content[i+1].Kind != yaml.SequenceNode {
				continue
			}
			for j, l := range n.Content[i+1].Content {
				if l.Kind == yaml.MappingNode {
					e := e
					e.Field = fmt.Sprintf("limits[%d]", j)
					addKeys(l, limitKeys, e)
				}
			}
		}
	}
	addKeys(top, topKeys, Error{Index: -1})
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i].Value, top.Content[i+1]
		switch k {
		case "defaults":
			ln.defaults = addKeys(v, switchKeys, Error{Section: "defaults", Index: -1})
		case "rules", "descriptors":
			if v.Kind != yaml.SequenceNode {
				errs = append(errs, &Error{Line: v.Line, Section: k, Index: -1, Msg: "must be a list (- name: ...)"})
				continue
			}
			for j, item := range v.Content {
				if k == "rules" {
					e := Error{Section: k, Index: j, Name: named(item, "name")}
					ln.rules = append(ln.rules, addKeys(item, ruleKeys, e))
					checkLimits(item, e)
				} else {
					e := Error{Section: k, Index: j, Name: named(item, "domain", "key")}
					ln.descriptors = append(ln.descriptors, addKeys(item, descriptorKeys, e))
					checkLimits(item, e)
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Second pass: the typed decode, strict.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				errs = append(errs, yamlContext(msg, ln, doc))
			}
			return errors.Join(errs...)
		}
		return yamlSyntax(err)
	}
	return nil
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
		for f, l := range m {
			if f != "" && l == line {
				e.Field = f
			}
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

func parseJSON(data []byte, doc *fileDoc, ln *lines) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	at := func(off int64) int { return lineAt(data, off) }
	syntax := func(err error) error {
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return &Error{Index: -1, Line: at(off), Msg: fmt.Sprintf("%v (byte offset %d)", err, off)}
	}
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &Error{Index: -1, Line: 1, Msg: `the file must be an object with a "rules" list`}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(err)
		}
		key, _ := tok.(string)
		keyLine := at(dec.InputOffset())
		switch key {
		case "version":
			if err := dec.Decode(&doc.Version); err != nil {
				return &Error{Index: -1, Line: keyLine, Field: "version", Msg: err.Error()}
			}
		case "defaults":
			ln.defaults = map[string]int{"": keyLine}
			if err := dec.Decode(&doc.Defaults); err != nil {
				f, msg := jsonMsg(err, switchKeys)
				return &Error{Section: "defaults", Index: -1, Line: keyLine, Field: f, Msg: msg}
			}
		case "rules", "descriptors":
			if tok, err := dec.Token(); err != nil {
				return syntax(err)
			} else if d, ok := tok.(json.Delim); !ok || d != '[' {
				return &Error{Section: key, Index: -1, Line: keyLine, Msg: "must be a list"}
			}
			for i := 0; dec.More(); i++ {
				line := at(skipSpace(data, dec.InputOffset()))
				var err error
				if key == "rules" {
					var r ruleDoc
					err = dec.Decode(&r)
					doc.Rules = append(doc.Rules, r)
					ln.rules = append(ln.rules, map[string]int{"": line})
				} else {
					var d descriptorDoc
					err = dec.Decode(&d)
					doc.Descriptors = append(doc.Descriptors, d)
					ln.descriptors = append(ln.descriptors, map[string]int{"": line})
				}
				if err != nil {
					known := ruleKeys
					if key == "descriptors" {
						known = descriptorKeys
					}
					f, msg := jsonMsg(err, known)
					var se *json.SyntaxError
					if errors.As(err, &se) {
						line = max(line, at(se.Offset))
						msg = fmt.Sprintf("%s (byte offset %d)", msg, se.Offset)
					}
					return &Error{Section: key, Index: i, Line: line, Field: f, Msg: msg}
				}
			}
			if _, err := dec.Token(); err != nil {
				return syntax(err)
			}
		default:
			return &Error{Index: -1, Line: keyLine, Msg: unknownField(key, topKeys)}
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntax(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Index: -1, Line: at(dec.InputOffset()), Msg: "unexpected data after the top-level object"}
	}
	return nil
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
