package storetest_test

import (
	"testing"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/core/storetest"
)

// TestRunVerbsDifferential runs the verbs' differential against the
// embedded store, a storekit.ReserveStore whose verbs are core's model on the
// words it keeps: it must pass, Reserve included (testdata/ownmath, run
// by TestExternalStore, is the store it is meant to catch).
func TestRunVerbsDifferential(t *testing.T) {
	storetest.RunVerbsDifferential(t, func(t *testing.T) core.Store {
		s := memstore.MustNew()
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Options{})
}
