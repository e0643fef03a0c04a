package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// httplimitPath is the import path of the package whose names are
// re-exported.
const httplimitPath = "github.com/limitkit/limitkit/httplimit"

// source is package httplimit, parsed, with each exported name's class.
type source struct {
	fset  *token.FileSet
	files []*ast.File // non-test files, in name order
	// imports maps a package name used in a file of httplimit to its
	// import path (the files agree on it, or parseHTTPLimit fails).
	imports map[string]string
	syms    map[string]bool // top-level names and "Recv.Method", for doc links
	fwd     map[string]bool // the forwarded names
}

// parseHTTPLimit parses the package in dir and classifies its exported
// names (classify.go); an unclassified name is an error.
func parseHTTPLimit(dir string) (*source, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	s := &source{fset: token.NewFileSet(), imports: map[string]string{}, syms: map[string]bool{}, fwd: map[string]bool{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(s.fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, f)
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			pkg := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				pkg = im.Name.Name
			}
			if old, ok := s.imports[pkg]; ok && old != path {
				return nil, fmt.Errorf("httplimit names two packages %s (%s, %s)", pkg, old, path)
			}
			s.imports[pkg] = path
		}
	}
	return s, s.classify()
}

// classify fills s.syms and s.fwd by the rule of classify.go.
func (s *source) classify() error {
	declared := map[string]bool{}
	var unclassified []string
	mark := func(name string, fwd bool) {
		declared[name] = true
		if fwd {
			s.fwd[name] = true
		}
	}
	// byList classifies a type or a function by the lists, then the rule.
	byList := func(name string, option bool) {
		_, listedNot := notForwarded[name]
		switch {
		case slices.Contains(forwarded, name):
			mark(name, true)
		case listedNot:
			mark(name, false)
		case option:
			mark(name, true)
		default:
			unclassified = append(unclassified, name)
		}
	}
	// Types and functions first: constants are classified by their type.
	for _, f := range s.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					s.syms[recvName(d.Recv)+"."+d.Name.Name] = true
					continue
				}
				s.syms[d.Name.Name] = true
				if d.Name.IsExported() {
					byList(d.Name.Name, isOption(d.Type))
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						s.syms[sp.Name.Name] = true
						if sp.Name.IsExported() {
							byList(sp.Name.Name, false)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							s.syms[n.Name] = true
						}
					}
				}
			}
		}
	}
	for _, f := range s.files {
		for _, d := range f.Decls {
			d, ok := d.(*ast.GenDecl)
			if !ok || (d.Tok != token.CONST && d.Tok != token.VAR) {
				continue
			}
			typ := ""
			for _, sp := range d.Specs {
				sp := sp.(*ast.ValueSpec)
				if id, ok := sp.Type.(*ast.Ident); ok {
					typ = id.Name
				} else if sp.Type != nil || d.Tok == token.VAR {
					typ = ""
				}
				for _, n := range sp.Names {
					if !n.IsExported() {
						continue
					}
					_, listedNot := notForwarded[n.Name]
					switch {
					case listedNot:
						mark(n.Name, false)
					case d.Tok == token.CONST && declared[typ]:
						mark(n.Name, s.fwd[typ])
					default:
						unclassified = append(unclassified, n.Name)
					}
				}
			}
		}
	}
	var stale []string
	for _, n := range forwarded {
		if !declared[n] {
			stale = append(stale, n)
		}
	}
	for n := range notForwarded {
		if !declared[n] {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	switch {
	case len(unclassified) > 0:
		return fmt.Errorf("httplimit exports %s, which internal/gen/forwarders/classify.go does not classify: add each to forwarded (every HTTP adapter re-exports it) or to notForwarded (with the reason)", strings.Join(unclassified, ", "))
	case len(stale) > 0:
		return fmt.Errorf("internal/gen/forwarders/classify.go lists %s, which httplimit no longer exports: remove them", strings.Join(stale, ", "))
	}
	return nil
}

// isOption reports whether a function's only result is Option.
func isOption(t *ast.FuncType) bool {
	if t.Results == nil || len(t.Results.List) != 1 || len(t.Results.List[0].Names) > 1 {
		return false
	}
	id, ok := t.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == "Option"
}

func recvName(l *ast.FieldList) string {
	t := l.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// generate returns the file of adapter pkg: gofmt'ed Go source.
func (s *source) generate(pkg string) ([]byte, error) {
	var body bytes.Buffer
	used := map[string]bool{"httplimit": true}
	// Types, each followed by the constants of its kind, then functions:
	// the order of go doc. Within each, httplimit's file and source order.
	for _, f := range s.files {
		for _, d := range f.Decls {
			d, ok := d.(*ast.GenDecl)
			if !ok || d.Tok != token.TYPE {
				continue
			}
			for _, sp := range d.Specs {
				sp := sp.(*ast.TypeSpec)
				if !s.fwd[sp.Name.Name] {
					continue
				}
				if sp.TypeParams != nil {
					return nil, fmt.Errorf("httplimit.%s is generic: forwarding it is not implemented", sp.Name.Name)
				}
				doc := sp.Doc
				if doc == nil && len(d.Specs) == 1 {
					doc = d.Doc
				}
				s.writeDoc(&body, "", doc, fmt.Sprintf("An alias of [httplimit.%s], documented there.", sp.Name.Name))
				fmt.Fprintf(&body, "type %s = httplimit.%s\n\n", sp.Name.Name, sp.Name.Name)
				s.writeConsts(&body, sp.Name.Name)
			}
		}
	}
	for _, f := range s.files {
		for _, d := range f.Decls {
			d, ok := d.(*ast.FuncDecl)
			if !ok || d.Recv != nil || !s.fwd[d.Name.Name] {
				continue
			}
			if err := s.writeFunc(&body, d, used); err != nil {
				return nil, err
			}
		}
	}

	var out bytes.Buffer
	out.WriteString("// Code generated by internal/gen/forwarders from package httplimit; DO NOT EDIT.\n\n")
	for _, line := range wrap(fmt.Sprintf("The options and types of package httplimit under the same names in "+
		"every HTTP adapter (%s), so that moving between frameworks is a search-and-replace of the "+
		"package name; their full documentation is httplimit's. To change them, change package "+
		"httplimit and run go generate ./... (ARCHITECTURE.md, \"How to add … An option\").",
		strings.Join(adapters, ", ")), 72) {
		fmt.Fprintf(&out, "// %s\n", line)
	}
	out.WriteString("\n")
	fmt.Fprintf(&out, "package %s\n\nimport (\n", pkg)
	var paths []string
	for p := range used {
		path := httplimitPath
		if p != "httplimit" {
			path = s.imports[p]
		}
		paths = append(paths, strconv.Quote(path))
	}
	slices.SortFunc(paths, func(a, b string) int { // the standard library first
		if sa, sb := !strings.Contains(a, "."), !strings.Contains(b, "."); sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	std := true
	for _, p := range paths {
		if std && strings.Contains(p, ".") {
			std = false
			if p != paths[0] {
				out.WriteString("\n")
			}
		}
		fmt.Fprintf(&out, "\t%s\n", p)
	}
	out.WriteString(")\n\n")
	out.Write(body.Bytes())
	b, err := format.Source(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated %s/%s does not parse: %v\n%s", pkg, outFile, err, out.Bytes())
	}
	return b, nil
}

// writeConsts writes the exported constants of type typ, block by block,
// each constant with its first sentence.
func (s *source) writeConsts(w *bytes.Buffer, typ string) {
	for _, f := range s.files {
		for _, d := range f.Decls {
			d, ok := d.(*ast.GenDecl)
			if !ok || d.Tok != token.CONST {
				continue
			}
			var names []*ast.Ident
			var docs []*ast.CommentGroup
			cur := ""
			for _, sp := range d.Specs {
				sp := sp.(*ast.ValueSpec)
				if id, ok := sp.Type.(*ast.Ident); ok {
					cur = id.Name
				} else if sp.Type != nil {
					cur = ""
				}
				for _, n := range sp.Names {
					if cur == typ && n.IsExported() && s.fwd[n.Name] {
						names = append(names, n)
						docs = append(docs, sp.Doc)
					}
				}
			}
			if len(names) == 0 {
				continue
			}
			s.writeDoc(w, "", d.Doc, fmt.Sprintf("See [httplimit.%s] and the constants after it.", names[0].Name))
			w.WriteString("const (\n")
			for i, n := range names {
				s.writeDoc(w, "\t", docs[i], "")
				fmt.Fprintf(w, "\t%s = httplimit.%s\n", n.Name, n.Name)
			}
			w.WriteString(")\n\n")
		}
	}
}

// writeFunc writes a function that calls httplimit's d with its
// arguments, recording in used the packages its signature names.
func (s *source) writeFunc(w *bytes.Buffer, d *ast.FuncDecl, used map[string]bool) error {
	name := d.Name.Name
	if d.Type.TypeParams != nil {
		return fmt.Errorf("httplimit.%s is generic: forwarding it is not implemented", name)
	}
	var params, args []string
	n := 0
	for _, fl := range d.Type.Params.List {
		t, dots := fl.Type, ""
		if e, ok := t.(*ast.Ellipsis); ok {
			t, dots = e.Elt, "..."
		}
		typ, err := s.typeString(t, used)
		if err != nil {
			return fmt.Errorf("httplimit.%s: %v", name, err)
		}
		idents := fl.Names
		if len(idents) == 0 {
			idents = []*ast.Ident{{Name: "_"}}
		}
		for _, id := range idents {
			p := id.Name
			if p == "_" {
				p = fmt.Sprintf("a%d", n)
			}
			n++
			params = append(params, p+" "+dots+typ)
			args = append(args, p+dots)
		}
	}
	results := ""
	if d.Type.Results != nil {
		var rs []string
		for _, fl := range d.Type.Results.List {
			typ, err := s.typeString(fl.Type, used)
			if err != nil {
				return fmt.Errorf("httplimit.%s: %v", name, err)
			}
			for range max(1, len(fl.Names)) {
				rs = append(rs, typ)
			}
		}
		results = strings.Join(rs, ", ")
		if len(rs) > 1 {
			results = "(" + results + ")"
		}
	}
	call := fmt.Sprintf("httplimit.%s(%s)", name, strings.Join(args, ", "))
	if results != "" {
		call = "return " + call
	}
	s.writeDoc(w, "", d.Doc, fmt.Sprintf("It calls [httplimit.%s], documented there.", name))
	fmt.Fprintf(w, "func %s(%s) %s {\n\t%s\n}\n\n", name, strings.Join(params, ", "), results, call)
	return nil
}

// typeString prints a type of httplimit's as the adapter writes it: a
// name of httplimit's is itself when forwarded, httplimit.Name otherwise;
// the packages it names are recorded in used.
func (s *source) typeString(t ast.Expr, used map[string]bool) (string, error) {
	var err error
	var rewrite func(n ast.Node) bool
	rewrite = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field: // skip parameter names of function types
			ast.Inspect(n.Type, rewrite)
			return false
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				if _, ok := s.imports[id.Name]; !ok {
					err = fmt.Errorf("type %s.%s: package %s is not imported", id.Name, n.Sel.Name, id.Name)
				}
				used[id.Name] = true
			}
			return false
		case *ast.Ident:
			if s.syms[n.Name] && !s.fwd[n.Name] {
				if !n.IsExported() {
					err = fmt.Errorf("its signature names the unexported %s", n.Name)
				}
				n.Name = "httplimit." + n.Name
			}
		}
		return true
	}
	// Rewrite a copy: the same AST is printed again for the next adapter.
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, s.fset, t); err != nil {
		return "", err
	}
	cp, perr := parser.ParseExpr(buf.String())
	if perr != nil {
		return "", perr
	}
	ast.Inspect(cp, rewrite)
	if err != nil {
		return "", err
	}
	buf.Reset()
	if err := printer.Fprint(&buf, token.NewFileSet(), cp); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// writeDoc writes the first sentence of httplimit's doc comment, with its
// doc links made to resolve in the adapter, and then tail, wrapped as a
// comment indented by indent.
func (s *source) writeDoc(w *bytes.Buffer, indent string, cg *ast.CommentGroup, tail string) {
	text := ""
	if cg != nil {
		text = s.firstSentence(cg.Text())
	}
	if tail != "" {
		text = strings.TrimSpace(text + " " + tail)
	}
	if text == "" {
		return
	}
	for _, line := range wrap(text, 72-len(indent)*4) {
		fmt.Fprintf(w, "%s// %s\n", indent, line)
	}
}

// firstSentence returns the first sentence of doc comment text (of its
// first paragraph), as one line. A doc link to a name the adapters
// re-export stays [Name]; one to another name of httplimit becomes
// [httplimit.Name]; one to another package is kept as written.
func (s *source) firstSentence(text string) string {
	p := comment.Parser{
		LookupPackage: func(name string) (string, bool) {
			path, ok := s.imports[name]
			return path, ok
		},
		LookupSym: func(recv, name string) bool {
			if recv != "" {
				return s.syms[recv+"."+name]
			}
			return s.syms[name]
		},
	}
	d := p.Parse(text)
	if len(d.Content) == 0 {
		return ""
	}
	para, ok := d.Content[0].(*comment.Paragraph)
	if !ok {
		return ""
	}
	var b strings.Builder
	depth := 0
	for i, t := range para.Text {
		switch t := t.(type) {
		case comment.Plain, comment.Italic:
			var str string
			if pl, ok := t.(comment.Plain); ok {
				str = string(pl)
			} else {
				str = string(t.(comment.Italic))
			}
			str = strings.ReplaceAll(str, "\n", " ")
			for j := 0; j < len(str); j++ {
				switch str[j] {
				case '(':
					depth++
				case ')':
					depth--
				case '.':
					last := j+1 == len(str)
					if depth > 0 || (last && i+1 < len(para.Text)) || (!last && str[j+1] != ' ') ||
						strings.HasSuffix(str[:j], "e.g") || strings.HasSuffix(str[:j], "i.e") {
						continue
					}
					b.WriteString(str[:j+1])
					return b.String()
				}
			}
			b.WriteString(str)
		case *comment.DocLink:
			b.WriteString(s.link(t))
		case *comment.Link:
			for _, x := range t.Text {
				if pl, ok := x.(comment.Plain); ok {
					b.WriteString(string(pl))
				}
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// link is a doc link as the adapter writes it.
func (s *source) link(l *comment.DocLink) string {
	if l.ImportPath != "" {
		var b strings.Builder
		for _, x := range l.Text {
			if pl, ok := x.(comment.Plain); ok {
				b.WriteString(string(pl))
			}
		}
		return "[" + b.String() + "]"
	}
	if l.Recv == "" && s.fwd[l.Name] {
		return "[" + l.Name + "]"
	}
	if l.Recv != "" {
		return "[httplimit." + l.Recv + "." + l.Name + "]"
	}
	return "[httplimit." + l.Name + "]"
}

// wrap breaks text into lines of at most width bytes where it can; a
// line never starts with what a doc comment would read as a list marker.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		rest := strings.TrimLeft(word, "0123456789")
		listy := word == "-" || word == "+" || word == "*" || (len(rest) < len(word) && (rest == "." || rest == ")"))
		if line != "" && len(line)+1+len(word) > width && !listy {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
