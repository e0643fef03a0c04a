package rules

import (
	"errors"
	"strings"
)

// pattern is a compiled route pattern: literal and parameter segments,
// optionally followed by "/*" (any continuation).
type pattern struct {
	segs   []segment
	prefix bool // ends in "/*"
	lits   int  // literal segments
	params int  // parameter segments
}

type segment struct {
	lit   string
	param bool
}

// maxRoute bounds a route pattern's length.
const maxRoute = 1024

// compilePattern parses a route pattern:
//
//	/api1            exact
//	/users/{id}      {name} or :name matches one non-empty segment
//	/api/*           "/api/" followed by anything (not "/api" itself)
//	/*               every path
func compilePattern(route string) (pattern, error) {
	var p pattern
	switch {
	case route == "":
		return p, errors.New(`is empty; write a path such as "/api1", "/api/*" or "/*"`)
	case len(route) > maxRoute:
		return p, errors.New("is longer than 1024 bytes")
	case route[0] != '/':
		return p, errors.New(`must start with "/"`)
	}
	body := route
	if strings.HasSuffix(route, "/*") {
		p.prefix = true
		body = route[:len(route)-2]
	}
	if p.prefix && body == "" {
		return p, nil // "/*"
	}
	parts := strings.Split(body[1:], "/")
	for i, s := range parts {
		switch {
		case strings.Contains(s, "*"):
			return p, errors.New(`a wildcard is allowed only as the last segment ("/api/*"); use {name} for one segment`)
		case s == "" && (i < len(parts)-1 || p.prefix):
			return p, errors.New(`has an empty segment ("//"); remove it`)
		case strings.HasPrefix(s, "{") || strings.HasPrefix(s, ":"):
			name := strings.TrimPrefix(s, ":")
			if s[0] == '{' {
				if !strings.HasSuffix(s, "}") {
					return p, errors.New("segment " + s + ` is not closed; write {name}`)
				}
				name = s[1 : len(s)-1]
			}
			if name == "" || strings.ContainsAny(name, "{}:") {
				return p, errors.New("segment " + s + ` is not a parameter; write {name} or :name`)
			}
			p.segs = append(p.segs, segment{param: true})
			p.params++
		case strings.ContainsAny(s, "{}"):
			return p, errors.New("segment " + s + ` mixes text and a parameter; a parameter is a whole segment`)
		default:
			p.segs = append(p.segs, segment{lit: s})
			p.lits++
		}
	}
	return p, nil
}

// match reports whether path matches the pattern. It does not allocate.
func (p *pattern) match(path string) bool {
	if path == "" || path[0] != '/' {
		return false
	}
	if len(p.segs) == 0 {
		return p.prefix
	}
	rest := path[1:]
	for i, sg := range p.segs {
		j := strings.IndexByte(rest, '/')
		s := rest
		if j >= 0 {
			s = rest[:j]
		}
		if sg.param {
			if s == "" {
				return false
			}
		} else if s != sg.lit {
			return false
		}
		if j < 0 {
			// The path ended: it matches only if this was the last segment
			// of an exact pattern.
			return i == len(p.segs)-1 && !p.prefix
		}
		rest = rest[j:] // starts with '/'
		if i < len(p.segs)-1 {
			rest = rest[1:]
		}
	}
	// Every segment matched and rest is "/..." (the path goes on).
	return p.prefix
}

// exact reports whether the pattern is fully literal.
func (p *pattern) exact() bool { return !p.prefix && p.params == 0 }

// moreSpecific reports whether a is more specific than b (see the package
// doc): fully literal first, then more literal segments, then without a
// trailing wildcard, then more parameter segments.
func moreSpecific(a, b *pattern) (bool, bool) {
	if a.exact() != b.exact() {
		return a.exact(), true
	}
	if a.lits != b.lits {
		return a.lits > b.lits, true
	}
	if a.prefix != b.prefix {
		return !a.prefix, true
	}
	if a.params != b.params {
		return a.params > b.params, true
	}
	return false, false
}
