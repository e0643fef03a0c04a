package rules

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
