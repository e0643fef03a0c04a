package rules

import (
	_ "embed"
	"slices"
	"sync"
)

//go:embed default.yaml
var defaultYAML []byte

// defaultFile returns the text of the embedded example rules file
// (rules/default.yaml): the
// design notes' endpoint table (logged-in callers on /api1, /api2 GET and
// POST, /api3, each with a 15-minute and a per-minute limit; anonymous GETs
// by IP on /*) plus the auth/login and messaging/email descriptors. The
// slice is a copy.
func defaultFile() []byte { return slices.Clone(defaultYAML) }

var defaultSet = sync.OnceValues(func() (*Set, error) { return parse(defaultYAML, syntaxYAML) })

// Default returns the embedded example rules (rules/default.yaml: the
// design notes' endpoint table and the auth/login and messaging/email
// descriptors) as a Set.
// It panics only if the embedded file were invalid, which the package's
// tests rule out. The Set is shared and immutable.
func Default() *Set {
	s, err := defaultSet()
	if err != nil {
		panic("rules: embedded default.yaml is invalid: " + err.Error())
	}
	return s
}
