package core_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
)

// TestStorekitInterfacesAreCores: each optional interface package
// storekit documents has exactly the method set of the one a Limiter
// looks for by type assertion, so that a store written to storekit's
// interfaces gets what their docs promise (a method renamed or retyped
// on one side alone fails here).
func TestStorekitInterfacesAreCores(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kit, core any
	}{
		{"LocalStore", (*storekit.LocalStore)(nil), (*core.LocalStoreT)(nil)},
		{"FallbackStore", (*storekit.FallbackStore)(nil), (*core.FallbackStoreT)(nil)},
		{"VerbStore", (*storekit.VerbStore)(nil), (*core.VerbStoreT)(nil)},
		{"ReserveStore", (*storekit.ReserveStore)(nil), (*core.ReserveStoreT)(nil)},
		{"ElasticStore", (*storekit.ElasticStore)(nil), (*core.ElasticStoreT)(nil)},
		{"Refunder", (*storekit.Refunder)(nil), (*core.RefunderT)(nil)},
		{"PolicyRegistrar", (*storekit.PolicyRegistrar)(nil), (*core.PolicyRegistrarT)(nil)},
		{"SlotStore", (*storekit.SlotStore)(nil), (*core.SlotStoreT)(nil)},
	} {
		kit, cor := reflect.TypeOf(tc.kit).Elem(), reflect.TypeOf(tc.core).Elem()
		assert.True(t, kit.Implements(cor) && cor.Implements(kit), "storekit.%s and core's differ: %v vs %v", tc.name, methods(kit), methods(cor))
	}
}

func methods(t reflect.Type) []string {
	var out []string
	for i := range t.NumMethod() {
		m := t.Method(i)
		out = append(out, m.Name+" "+m.Type.String())
	}
	return out
}
