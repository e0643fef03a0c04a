// Command forwarders writes the file of each HTTP adapter (nethttp,
// ginlimit, echolimit, fiberlimit) that re-exports package httplimit's
// options and types under the same names: type aliases, the constants
// declared with them, and one-line functions that call httplimit's. The
// re-exports let a user move between frameworks by replacing the package
// name (httplimit/doc.go says why); generating them means an option added
// to httplimit reaches every adapter, with the same signature, by running
//
//	go generate ./...
//
// and TestUpToDate fails, naming the file, while an adapter's copy differs
// from what this command writes.
//
// Run by go generate (each adapter's doc.go has the line), it writes the
// file of the package go generate names ($GOPACKAGE); run from anywhere
// in the module without $GOPACKAGE, it writes all four.
//
// Which names are re-exported is decided by the rule and the lists in
// classify.go: every exported name of httplimit is either forwarded or
// listed as not forwarded, and the command fails on a name that is
// neither, so a new one must be classified.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// adapters are the packages that re-export httplimit's options, each a
// directory at the module's root.
var adapters = []string{"nethttp", "ginlimit", "echolimit", "fiberlimit"}

// outFile is the name of the generated file in each adapter's directory.
const outFile = "options_gen.go"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "forwarders:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	todo := adapters
	if p := os.Getenv("GOPACKAGE"); p != "" {
		if !slices.Contains(adapters, p) {
			return fmt.Errorf("package %s is not an HTTP adapter (%v): remove its go:generate line, or add it to the adapters list", p, adapters)
		}
		todo = []string{p}
	}
	src, err := parseHTTPLimit(filepath.Join(root, "httplimit"))
	if err != nil {
		return err
	}
	for _, p := range todo {
		b, err := src.generate(p)
		if err != nil {
			return err
		}
		path := filepath.Join(root, p, outFile)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory
// that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = parent
	}
}
