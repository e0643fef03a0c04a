package rules

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// syntax is a rules file's syntax.
type syntax uint8

const (
	syntaxYAML syntax = iota // the default: for files not ending in .json
	syntaxJSON
)

// String returns "yaml" or "json".
func (f syntax) String() string {
	if f == syntaxJSON {
		return "json"
	}
	return "yaml"
}

// sniff is the syntax of data as [Parse] reads it: JSON when its first
// byte that is not white space is '{' (a JSON rules file is an object),
// YAML otherwise (a YAML rules file starts with a key, "---" or a
// comment).
func sniff(data []byte) syntax {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return syntaxJSON
	}
	return syntaxYAML
}

// maxFileSize bounds the size of a rules file the loaders accept: 4 MiB.
const maxFileSize = 4 << 20

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
	Name           string     `yaml:"name" json:"name"`
	Methods        []string   `yaml:"methods,omitempty,flow" json:"methods,omitempty"`
	Route          string     `yaml:"route" json:"route"`
	Identity       string     `yaml:"identity,omitempty" json:"identity,omitempty"`
	Key            string     `yaml:"key,omitempty" json:"key,omitempty"`
	Limits         []limitDoc `yaml:"limits,omitempty,flow" json:"limits,omitempty"`
	Timezone       string     `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	WeekStart      string     `yaml:"week_start,omitempty" json:"week_start,omitempty"`
	concurrencyDoc `yaml:",inline"`
	switchesDoc    `yaml:",inline"`
	policiesDoc    `yaml:",inline"`
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
// of at most 4 MiB, within 5 seconds.
func LoadFile(path string) (*Set, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	format := syntaxYAML
	if strings.EqualFold(filepath.Ext(path), ".json") {
		format = syntaxJSON
	}
	s, err := parse(data, format)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse parses and validates a rules file: JSON when its first byte that
// is not white space is '{', YAML otherwise. Unknown fields and keys written
// twice (at any depth) are errors, and every problem found (up to 20) is
// reported in line order with its line, the rule (index and name), the
// field and what to fix; see [Error]. A syntax error, or a value of the
// wrong type, ends the load before the rules are validated. Parse takes
// time and memory linear in len(data), at most 4 MiB.
func Parse(data []byte) (*Set, error) { return parse(data, sniff(data)) }

// parse is Parse in the given syntax.
func parse(data []byte, format syntax) (*Set, error) {
	if len(data) > maxFileSize {
		return nil, &Error{Index: -1, Msg: fmt.Sprintf("file is larger than %d bytes", maxFileSize)}
	}
	var (
		doc fileDoc
		ln  lines
		c   collector
		ok  bool
	)
	if format == syntaxJSON {
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
