package redisstore

import (
	"os"
	"testing"

	"github.com/limitkit/limitkit/internal/redistest"
)

// TestMain stops redistest.SharedCluster's servers after the tests.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
