package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
var root = filepath.Join("..", "..", "..")

// TestUpToDate regenerates every adapter's file in memory from the
// checkout's httplimit and fails, naming the file and the first line that
// differs, when the file on disk is not exactly that: an option added to
// httplimit and not regenerated, a forwarder edited or deleted by hand,
// or an exported name of httplimit that classify.go does not classify.
func TestUpToDate(t *testing.T) {
	src, err := parseHTTPLimit(filepath.Join(root, "httplimit"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range adapters {
		want, err := src.generate(p)
		if err != nil {
			t.Fatal(err)
		}
		path := p + "/" + outFile
		have, err := os.ReadFile(filepath.Join(root, p, outFile))
		if err != nil {
			t.Errorf("%s: %v: run go generate ./...", path, err)
			continue
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is not what internal/gen/forwarders writes from package httplimit: run go generate ./... (never edit it by hand)\n%s", path, firstDiff(have, want))
		}
	}
}

// firstDiff describes the first line where have and want differ.
func firstDiff(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(h), len(w)); i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl || i >= len(h) || i >= len(w) {
			return fmt.Sprintf("line %d: the file has\n\t%q\nthe generator writes\n\t%q", i+1, hl, wl)
		}
	}
	return "(no line differs: line endings?)"
}

// TestGenerateLine checks that each adapter names the generator in a
// go:generate line, so that go generate ./... refreshes its file, and that
// no other package does.
func TestGenerateLine(t *testing.T) {
	const line = "//go:generate go run ../internal/gen/forwarders"
	files, err := filepath.Glob(filepath.Join(root, "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(line)) {
			found[filepath.Base(filepath.Dir(f))] = true
		}
	}
	for _, p := range adapters {
		if !found[p] {
			t.Errorf("package %s has no %q line: go generate ./... would not refresh its %s", p, line, outFile)
		}
		delete(found, p)
	}
	for p := range found {
		t.Errorf("package %s has a %q line but is not in the generator's adapters list", p, line)
	}
}

// TestClassifyFails checks the generator's refusals: an exported name of
// httplimit that is not classified, and a listed name httplimit no longer
// exports.
func TestClassifyFails(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unclassified type", "type Knob int", "httplimit exports Knob, which internal/gen/forwarders/classify.go does not classify"},
		{"unclassified func", "func Helper() int { return 0 }", "httplimit exports Helper, which"},
		{"unclassified const", "const Limit = 3", "httplimit exports Limit, which"},
		{"unclassified var", "var Default Option", "httplimit exports Default, which"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyHTTPLimit(t)
			extra := "package httplimit\n\n" + tc.src + "\n"
			if err := os.WriteFile(filepath.Join(dir, "zz_extra.go"), []byte(extra), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := parseHTTPLimit(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("stale list", func(t *testing.T) {
		notForwarded["Gone"] = "test"
		defer delete(notForwarded, "Gone")
		_, err := parseHTTPLimit(filepath.Join(root, "httplimit"))
		if want := "lists Gone, which httplimit no longer exports"; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error containing %q", err, want)
		}
	})
}

// TestNewOptionForwarded checks the rule that makes adding an option one
// step: a new function of httplimit returning Option is forwarded by every
// adapter without touching classify.go, with its first sentence.
func TestNewOptionForwarded(t *testing.T) {
	dir := copyHTTPLimit(t)
	extra := "package httplimit\n\n// WithKnob turns the knob (see [Engine] and [WithKey]). More.\nfunc WithKnob(n int, fs ...func(c *Config)) Option { return nil }\n"
	if err := os.WriteFile(filepath.Join(dir, "zz_extra.go"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := parseHTTPLimit(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.generate("ginlimit")
	if err != nil {
		t.Fatal(err)
	}
	want := "// WithKnob turns the knob (see [httplimit.Engine] and [WithKey]). It calls\n" +
		"// [httplimit.WithKnob], documented there.\n" +
		"func WithKnob(n int, fs ...func(c *httplimit.Config)) Option {\n" +
		"\treturn httplimit.WithKnob(n, fs...)\n}\n"
	if !strings.Contains(string(b), want) {
		t.Fatalf("generated file lacks\n%s\ngot:\n%s", want, b)
	}
}

// TestFirstSentence checks where a doc comment's first sentence ends.
func TestFirstSentence(t *testing.T) {
	s := &source{syms: map[string]bool{"Engine": true, "WithKey": true}, fwd: map[string]bool{"WithKey": true}, imports: map[string]string{}}
	for _, tc := range []struct{ in, want string }{
		{"A b. C d.", "A b."},
		{"A, e.g. b (c. D) e.\nF.", "A, e.g. b (c. D) e."},
		{"A\nb [Engine]. C.", "A b [httplimit.Engine]."},
		{"A [WithKey] keyfuncs.PeerIP().Key is. B.", "A [WithKey] keyfuncs.PeerIP().Key is."},
		{"No period", "No period"},
	} {
		if got := s.firstSentence(tc.in); got != tc.want {
			t.Errorf("firstSentence(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// copyHTTPLimit copies httplimit's non-test Go files to a temporary
// directory.
func copyHTTPLimit(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(root, "httplimit", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
