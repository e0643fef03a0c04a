package memstore_test

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/internal/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s := memstore.MustNew()
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Options{})
}
