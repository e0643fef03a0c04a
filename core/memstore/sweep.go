package memstore

import (
	"time"
)

// The background sweeper that drops expired keys.

// sweep drops every key whose state has expired at the clock's now. The
// sweeper calls it; tests with a manual clock may call it directly.
func (s *memStore) sweep() {
	now := s.clock.Now().UnixMicro()
	for _, t := range *s.tables.Load() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.sweep(t, now)
			sh.mu.Unlock()
		}
	}
}

func (s *memStore) sweeper() {
	defer close(s.done)
	tk := time.NewTicker(s.interval)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
			s.sweep()
		}
	}
}

// sweep drops every key whose state has expired at now.
func (sh *shard) sweep(t *table, now int64) {
	for i := 0; i < len(sh.keys); {
		if sh.keys[i] != 0 && t.policy.ExpiresAt(sh.state(t, i), now) <= now {
			sh.delete(t, i) // a later key may have shifted into i: look again
			continue
		}
		i++
	}
}
