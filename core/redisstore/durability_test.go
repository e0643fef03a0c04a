package redisstore

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/limitkit/limitkit/internal/redistest"
)

// TestCheckWarnsWhenPersistenceIsOff: Check passes but warns (WARN, with
// the server's address) when a restart of Redis would forget the limits:
// persistence off, snapshots only, AOF not fsynced; it is silent with
// AOF everysec.
func TestCheckWarnsWhenPersistenceIsOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for no warning
	}{
		{"off", nil, "persistence is off (appendonly no, save"},
		{"rdb", []string{"--save", "900 1"}, "only RDB snapshots (appendonly no, save"},
		{"aof everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, ""},
		{"aof no fsync", []string{"--appendonly", "yes", "--appendfsync", "no"}, "appendfsync no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartNode(t, tc.args...)
			var buf bytes.Buffer
			s := newStore(t, srv.NewClient(t), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			require.NoError(t, s.Check(checkCtx(t, 5*time.Second)), "a warning does not fail Check")
			if tc.want == "" {
				assert.Empty(t, buf.String())
				return
			}
			assert.Contains(t, buf.String(), "level=WARN")
			assert.Contains(t, buf.String(), tc.want)
			assert.Contains(t, buf.String(), "addr="+srv.Addr)
		})
	}
	t.Run("silenced", func(t *testing.T) {
		srv := redistest.StartNode(t)
		s := newStore(t, srv.NewClient(t), WithLogger(nil))
		assert.NoError(t, s.Check(checkCtx(t, 5*time.Second)))
	})
}
