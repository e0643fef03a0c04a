package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/storekit"
	"github.com/limitkit/limitkit/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewValidates(t *testing.T) {
	ok := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer ok.Close()
	tests := []struct {
		name   string
		client redis.UniversalClient
		opts   []Option
		want   string
	}{
		{"nil client", nil, nil, "nil client"},
		{"no context timeout", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), nil, "ContextTimeoutEnabled"},
		{"no context timeout cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), nil, "ContextTimeoutEnabled"},
		{"no context timeout ring", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}), nil, "ContextTimeoutEnabled"},
		{"brace in prefix", ok, []Option{WithPrefix("app{x}:")}, "must not contain"},
		{"long prefix", ok, []Option{WithPrefix(strings.Repeat("p", 129))}, "at most 128"},
		{"nil option", ok, []Option{nil}, "nil Option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, isCloser := tt.client.(interface{ Close() error }); isCloser && tt.client != ok {
				defer c.Close()
			}
			s, err := newRedis(tt.client, tt.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "redisstore: "), err.Error())
		})
	}
	s, err := newRedis(ok)
	require.NoError(t, err)
	assert.Equal(t, defaultPrefix, s.prefix, "default prefix")
	assert.False(t, s.clientTime, "Redis TIME by default")
	assert.Equal(t, ttlRoundPad.Milliseconds(), s.ttlPad)
	s, err = newRedis(ok, WithPrefix(""), WithClientTime())
	require.NoError(t, err)
	assert.Equal(t, "", s.prefix)
	assert.Equal(t, (ttlRoundPad + clientTimeSlack).Milliseconds(), s.ttlPad)
}

func TestTakeErrors(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	s := newStore(t, c)
	_, err := s.Take(context.Background(), "k", nil, time.Now(), 1)
	require.ErrorContains(t, err, "redisstore: Take: nil policy")
	_, err = s.Take(context.Background(), "k", &core.Policy{Name: "bad"}, time.Now(), 1)
	require.ErrorContains(t, err, "redisstore: core: policy \"bad\": no limits")
	p := mustPolicy(t, core.Policy{Name: "ok", Limits: []core.Limit{core.PerSecond(1)}})
	_, err = s.Take(context.Background(), "k", p, time.Now(), 1) // nothing listens on port 1
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "redisstore: policy \"ok\": "), err.Error())
}

// TestUnexpectedReply: a reply of the wrong shape is an error, never a
// panic or a made-up decision: decision's checks on their own, then the
// store's whole reply path (Take and TakeBatch) against a real Redis.
func TestUnexpectedReply(t *testing.T) {
	p := mustPolicy(t, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1), core.PerMinute(10)}})
	cp, err := (&redisStore{}).compile(p)
	require.NoError(t, err)
	for _, v := range [][]int64{nil, {1, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, -1, 0, 0, 0}, {1, 0, -1, 0, 0}, {0, 0, 0, 0, -2}} {
		_, err := decision(cp, v, false)
		require.Error(t, err, "%v", v)
		assert.Contains(t, err.Error(), "redisstore: policy \"p\": unexpected script reply")
	}
	d, err := decision(cp, []int64{0, 1, 5, 7, -1}, false)
	require.NoError(t, err)
	assert.Equal(t, core.Decision{Limit: p.Limits[1], ResetAfter: 7 * time.Microsecond, RetryAfter: core.Never, Policy: "p"}, d,
		"denied: Remaining 0, Never for -1")
	d, err = decision(cp, []int64{0, 1, 5, 7, -1, 1}, false)
	require.NoError(t, err)
	assert.Equal(t, core.Decision{Limit: p.Limits[1], ResetAfter: 7 * time.Microsecond, RetryAfter: core.Never, Policy: "p"}, d,
		"a hard policy ignores the elastic flag")

	// The store's own reply path (script.run reading a reply of either shape,
	// EVALSHA then the EVAL fallback, and TakeBatch's pipeline) against a
	// real Redis, with the policy's script swapped for one whose reply is
	// malformed (as a script replaced under the same SHA would be): every
	// shape is an error naming the policy, with a zero Decision, never a
	// panic or a made-up decision.
	s, _, _ := nodeStore(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, src, want string }{
		{"string", `return 'hello'`, "unexpected script reply"},
		{"packed allowed, 15 bytes", `return string.rep('a', 15)`, "unexpected script reply"},
		{"packed allowed, limit index out of range", `return struct.pack('<i8i8i8', 0, 0, 2)`, "unexpected script reply"},
		{"packed allowed, negative remaining", `return struct.pack('<i8i8', -1, 0)`, "unexpected script reply"},
		{"integer", `return 1`, "unexpected script reply"},
		{"nil", `return nil`, "redis: nil"},
		{"error", `return redis.error_reply('boom')`, "ERR boom"},
		{"empty array", `return {}`, "unexpected script reply"},
		{"short array", `return {1, 0, 0, 0}`, "unexpected script reply"},
		{"long array", `return {1, 0, 0, 0, 0, 0, 0}`, "unexpected script reply"},
		{"allowed 2", `return {2, 0, 0, 0, 0}`, "unexpected script reply"},
		{"limit index out of range", `return {1, 2, 0, 0, 0}`, "unexpected script reply"},
		{"negative limit index", `return {0, -1, 0, 0, 5}`, "unexpected script reply"},
		{"negative remaining", `return {1, 0, -1, 0, 0}`, "unexpected script reply"},
		{"retry below -1", `return {0, 0, 0, 0, -2}`, "unexpected script reply"},
		{"string element", `return {1, 0, 'x', 0, 0}`, "unexpected script reply"},
		{"nested array", `return {1, 0, 5, 7, {1}}`, "unexpected script reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPolicy(t, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1), core.PerMinute(10)}})
			withScript(t, s, p, tc.src)
			for i := range 2 { // EVAL fallback (NOSCRIPT), then EVALSHA
				d, err := s.Take(ctx, "k", p, epoch, 1)
				require.Error(t, err, "call %d", i)
				assert.Contains(t, err.Error(), `redisstore: policy "p": `+tc.want, "call %d", i)
				assert.Zero(t, d, "call %d", i)
			}
			b := []storekit.BatchTake{{Key: "k", Policy: p, Now: epoch, Cost: 1}, {Key: "k2", Policy: p, Now: epoch, Cost: 1}}
			_ = s.TakeBatch(ctx, b)
			for i := range b {
				require.Error(t, b[i].Err, "batch entry %d", i)
				assert.Contains(t, b[i].Err.Error(), `redisstore: policy "p": `+tc.want, "batch entry %d", i)
				assert.Zero(t, b[i].Decision, "batch entry %d", i)
			}
		})
	}
	// The same path with a well-formed reply decides: the hook is live.
	p = mustPolicy(t, core.Policy{Name: "p", Limits: []core.Limit{core.PerSecond(1), core.PerMinute(10)}})
	withScript(t, s, p, `return {0, 1, 5, 7, -1}`)
	d, err = s.Take(ctx, "k", p, epoch, 1)
	require.NoError(t, err)
	assert.Equal(t, core.Decision{Limit: p.Limits[1], ResetAfter: 7 * time.Microsecond, RetryAfter: core.Never, Policy: "p"}, d)
	// The packed allowed answers (see unpackAllowed): remaining and reset,
	// then the binding limit's index when there are three; every byte of
	// each number counts (little-endian, the high bytes included).
	for _, tc := range []struct {
		src  string
		want core.Decision
	}{
		{`return struct.pack('<i8i8', 0, 7)`, core.Decision{Allowed: true, Limit: p.Limits[0], ResetAfter: 7 * time.Microsecond, Policy: "p"}},
		{`return struct.pack('<i8i8i8', 3, 2^40 + 7, 1)`, core.Decision{Allowed: true, Limit: p.Limits[1], Remaining: 3, ResetAfter: (1<<40 + 7) * time.Microsecond, Policy: "p"}},
		{`return struct.pack('<i8i8i8', 2^52 + 258, 1, 0)`, core.Decision{Allowed: true, Limit: p.Limits[0], Remaining: 1<<52 + 258, ResetAfter: time.Microsecond, Policy: "p"}},
	} {
		withScript(t, s, p, tc.src)
		d, err = s.Take(ctx, "k", p, epoch, 1)
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.want, d, tc.src)
		b := []storekit.BatchTake{{Key: "k", Policy: p, Now: epoch, Cost: 1}}
		require.NoError(t, s.TakeBatch(ctx, b), tc.src)
		require.NoError(t, b[0].Err, tc.src)
		assert.Equal(t, tc.want, b[0].Decision, tc.src)
	}
}

// withScript makes s run src, instead of the script compiled for it, for
// policy p (the store's own compile, cache and reply path otherwise).
func withScript(t *testing.T, s *redisStore, p *core.Policy, src string) {
	t.Helper()
	c, err := s.policy(p)
	require.NoError(t, err)
	c.script = newScript(src)
}

// TestOneRoundTrip counts commands with a go-redis hook: exactly one per
// decision for every algorithm and a two-limit policy, on a node and on a
// cluster, once the script is cached; after SCRIPT FLUSH the EVAL
// fallback is invisible to the caller.
func TestOneRoundTrip(t *testing.T) {
	srv := redistest.StartNode(t)
	cl := redistest.StartCluster(t)
	clients := map[string]redis.UniversalClient{"node": srv.NewClient(t), "cluster": cl.NewClient(t)}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if cc, ok := c.(*redis.ClusterClient); ok {
				cc.ReloadState(ctx) // load slots before counting
				require.NoError(t, cc.Ping(ctx).Err())
			}
			var n counter
			c.AddHook(&n)
			s := newStore(t, c)
			require.NoError(t, s.Preload(ctx)) // on every master of the cluster
			for _, pol := range benchPolicies() {
				p := mustPolicy(t, pol)
				require.NoError(t, s.Preload(ctx, p)) // its baked copy too
				before := n.n.Load()
				for i := 0; i < 20; i++ {
					_, err := s.Take(ctx, "user-"+strconv.Itoa(i), p, time.Time{}, 1)
					require.NoError(t, err)
				}
				assert.Equal(t, int64(20), n.n.Load()-before, p.Name)
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() }))
			} else {
				require.NoError(t, c.ScriptFlush(ctx).Err())
			}
			p := mustPolicy(t, benchPolicies()[0])
			d, err := s.Take(ctx, "after-flush", p, time.Time{}, 1)
			require.NoError(t, err, "NOSCRIPT is invisible")
			assert.True(t, d.Allowed)
		})
	}
}

// crc16 is Redis Cluster's key hash (CRC16-CCITT/XMODEM), written out so
// the slot test does not trust the code under test.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the cluster slot of key, hash tags included.
func slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16([]byte(key)) % 16384
}

// TestKeysOneSlot is the static check that every key set a script touches
// maps to one cluster slot, for every algorithm, up to eight limits,
// prefixes and hostile keys; CLUSTER KEYSLOT agrees with the local CRC16,
// and the raw key never appears in a Redis key.
func TestKeysOneSlot(t *testing.T) {
	srv := redistest.StartNode(t, "--cluster-enabled", "yes")
	ctx := context.Background()
	c := srv.NewClient(t)
	hostile := []string{"", "{", "}", "{}", "{a}", "}{", "a:b", "a\nb", "a\x00b", "user:{victim}", strings.Repeat("{x}", 1000), strings.Repeat("k", 64<<10)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		hostile = append(hostile, string(b))
	}
	limits := []core.Limit{core.PerSecond(10), core.PerMinute(100), core.PerHour(1000), core.PerDay(5000),
		core.Per(7, 7*time.Second), core.Per(60, 3*time.Minute), core.Per(90, 15*time.Minute), core.Per(3, 2*time.Second)}
	slots := map[uint16]bool{}
	for _, prefix := range []string{defaultPrefix, "", "app:prod:"} {
		s := newStore(t, c, WithPrefix(prefix))
		for a := core.GCRA; a <= core.SlidingWindowCounter; a++ {
			for n := 1; n <= 8; n++ {
				p := mustPolicy(t, core.Policy{Name: fmt.Sprintf("slot-%d", n), Algorithm: a, Limits: limits[:n]})
				for _, k := range hostile {
					keys, err := s.Keys(p, k)
					require.NoError(t, err)
					require.Len(t, keys, n)
					want := slot(keys[0])
					slots[want] = true
					for _, key := range keys {
						require.Equal(t, want, slot(key), "%q", key)
						require.True(t, strings.HasPrefix(key, prefix+"{"))
						require.Len(t, key, len(prefix)+2+tagLen+2+4, "fixed length whatever the input")
						if len(k) >= 3 {
							require.NotContains(t, key, k, "raw key material")
						}
					}
					if n == 8 && a == core.GCRA && prefix == defaultPrefix {
						got, err := c.ClusterKeySlot(ctx, keys[0]).Result()
						require.NoError(t, err)
						require.Equal(t, int64(want), got, "CLUSTER KEYSLOT agrees with the local CRC16")
					}
				}
			}
		}
	}
	assert.Greater(t, len(slots), 20, "different keys spread over slots")
}

// TestTTLHygiene: after random traffic under Redis time (the default),
// every key has a TTL, and it is at most the key's refill time + ttlRoundPad
// (window + one bucket for the sliding counter, Burst/Requests × window
// for GCRA and the token bucket).
func TestTTLHygiene(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	pols := append(benchPolicies(),
		core.Policy{Name: "tb-burst", Algorithm: core.TokenBucket, Limits: []core.Limit{core.PerSecond(5).WithBurst(20)}},
		core.Policy{Name: "sc-counted", Algorithm: core.SlidingWindowCounter, Buckets: 6, CountDenied: true, Limits: []core.Limit{core.Per(20, 3*time.Second)}},
		core.Policy{Name: "gcra-counted", CountDenied: true, Limits: []core.Limit{core.Per(20, 3*time.Second)}},
	)
	max := map[string]time.Duration{}
	for _, pol := range pols {
		p := mustPolicy(t, pol)
		for i := 0; i < 300; i++ {
			k := "u" + strconv.Itoa(i%7)
			_, err := s.Take(ctx, k, p, time.Time{}, int64(i%3))
			require.NoError(t, err)
		}
		for i := 0; i < 7; i++ {
			keys, err := s.Keys(p, "u"+strconv.Itoa(i))
			require.NoError(t, err)
			for j, key := range keys {
				l := p.Limits[j]
				bound := l.Window
				switch p.Algorithm {
				case core.GCRA, core.TokenBucket:
					bound = time.Duration(core.EmissionInterval(l)*max64(l.Burst, l.Requests)) * time.Microsecond
				case core.SlidingWindowCounter:
					bound += l.Window / time.Duration(p.Buckets)
				}
				max[key] = bound + ttlRoundPad
			}
		}
	}
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		bound, ok := max[k]
		require.True(t, ok, "unexpected key %q", k)
		ttl, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, k)
		assert.LessOrEqual(t, ttl, bound, k)
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// TestTTLRepair: a key found without a TTL (PERSIST by an operator, or a
// write by an older version) gets one back on the next decision, even one
// that writes nothing.
func TestTTLRepair(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	for _, pol := range benchPolicies() {
		p := mustPolicy(t, pol)
		keys, err := s.Keys(p, "r")
		require.NoError(t, err)
		_, err = s.Take(ctx, "r", p, time.Time{}, 1)
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, c.Persist(ctx, k).Err())
			require.Equal(t, time.Duration(-1), c.PTTL(ctx, k).Val())
		}
		_, err = s.Take(ctx, "r", p, time.Time{}, 0) // a peek writes nothing
		require.NoError(t, err)
		for _, k := range keys {
			ttl := c.PTTL(ctx, k).Val()
			assert.Positive(t, ttl, "%s %s", p.Name, k)
			l := p.Limits[0]
			assert.LessOrEqual(t, ttl, l.Window+l.Window/time.Duration(max(p.Buckets, 1))+ttlRoundPad, "%s %s", p.Name, k)
		}
	}
}

// TestRedisTime: by default the store decides at the Redis server's time
// and ignores the now argument, so app servers with skewed clocks agree.
func TestRedisTime(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c)
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerHour(2)}})
	skews := []time.Time{time.Now(), time.Now().Add(2 * time.Hour), time.Unix(0, 0), {}}
	allowed := 0
	for _, now := range skews {
		d, err := s.Take(ctx, "k", p, now, 1)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
		assert.LessOrEqual(t, d.ResetAfter, time.Hour)
		assert.Positive(t, d.ResetAfter)
	}
	assert.Equal(t, 2, allowed, "one window, whatever the app servers' clocks say")

	// With client time, the same skews are separate windows.
	cs := newStore(t, c, WithClientTime(), WithPrefix("client:"))
	allowed = 0
	for _, now := range skews[:2] {
		for i := 0; i < 2; i++ {
			d, err := cs.Take(ctx, "k", p, now, 1)
			require.NoError(t, err)
			if d.Allowed {
				allowed++
			}
		}
	}
	assert.Equal(t, 4, allowed)
}

// TestMemoryLayout pins the state encodings: a single-limit GCRA, fixed
// window and token bucket key is an int-encoded string.
func TestMemoryLayout(t *testing.T) {
	srv := redistest.StartNode(t)
	c := srv.NewClient(t)
	s := newStore(t, c, WithClientTime())
	ctx := context.Background()
	for _, a := range []core.Algorithm{core.GCRA, core.FixedWindow, core.TokenBucket} {
		p := mustPolicy(t, core.Policy{Name: "mem-" + a.String(), Algorithm: a, Limits: []core.Limit{core.PerMinute(100)}})
		_, err := s.Take(ctx, "user-123456", p, epoch, 3)
		require.NoError(t, err)
		keys, _ := s.Keys(p, "user-123456")
		enc, err := c.ObjectEncoding(ctx, keys[0]).Result()
		require.NoError(t, err)
		assert.Equal(t, "int", enc, a.String())
		assert.Len(t, keys[0], 29, "a default key is 29 bytes")
	}
}

// TestConcurrentStoresExact: eight stores, each with its own client, × 100
// goroutines on one key with frozen time admit exactly the limit, on a
// node and on a cluster, for a two-limit policy (the conformance suite
// covers single limits).
func TestConcurrentStoresExact(t *testing.T) {
	t.Parallel()
	srv := redistest.StartNode(t)
	cl := redistest.SharedCluster(t) // on keys of its own (KeyPrefix)
	newClient := map[string]func(t *testing.T) redis.UniversalClient{
		"node":    func(t *testing.T) redis.UniversalClient { return srv.NewClient(t) },
		"cluster": func(t *testing.T) redis.UniversalClient { return cl.NewClient(t) },
	}
	for name, nc := range newClient {
		t.Run(name, func(t *testing.T) {
			for _, a := range []core.Algorithm{core.GCRA, core.SlidingWindowLog} {
				p := mustPolicy(t, core.Policy{Name: "exact2-" + a.String(), Algorithm: a,
					Limits: []core.Limit{core.PerHour(1000), core.PerMinute(250)}})
				stores := make([]*redisStore, 8)
				for i := range stores {
					stores[i] = newStore(t, nc(t), WithClientTime(), WithPrefix(redistest.KeyPrefix(t)))
				}
				admitted := make(chan bool, 800*2)
				done := make(chan struct{})
				for g := 0; g < 800; g++ {
					go func(g int) {
						defer func() { done <- struct{}{} }()
						for i := 0; i < 2; i++ {
							d, err := stores[g%8].Take(context.Background(), "hot", p, epoch, 1)
							if err != nil {
								t.Error(err)
								return
							}
							admitted <- d.Allowed
						}
					}(g)
				}
				for g := 0; g < 800; g++ {
					<-done
				}
				close(admitted)
				n := 0
				for ok := range admitted {
					if ok {
						n++
					}
				}
				assert.Equal(t, 250, n, a.String())
			}
		})
	}
}

// TestRing: the store works over a go-redis Ring (client-side sharding by
// hash tag): decisions match core on two shards.
func TestRing(t *testing.T) {
	a, b := redistest.StartNode(t), redistest.StartNode(t)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"a": a.Addr, "b": b.Addr},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { ring.Close() })
	s := newStore(t, ring, WithClientTime())
	ctx := context.Background()
	p := mustPolicy(t, core.Policy{Name: "ring", Algorithm: core.SlidingWindowLog,
		Limits: []core.Limit{core.Per(10, 10*time.Second), core.Per(3, time.Second)}})
	r := newRef(p)
	now := epoch
	for i := 0; i < 300; i++ {
		now = now.Add(time.Duration(i%7) * 97 * time.Millisecond)
		k := "u" + strconv.Itoa(i%9)
		want := r.take(k, now, int64(i%3))
		got, err := s.Take(ctx, k, p, now, int64(i%3))
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d", i)
	}
	na, _ := a.NewClient(t).DBSize(ctx).Result()
	nb, _ := b.NewClient(t).DBSize(ctx).Result()
	assert.Positive(t, na, "keys on shard a")
	assert.Positive(t, nb, "keys on shard b")
}

// FuzzKeys: any key, any policy name gives fixed-length keys in one slot
// that do not contain the raw key.
func FuzzKeys(f *testing.F) {
	for _, k := range []string{"", "{", "}{", "a\x00b", "user:{victim}", strings.Repeat("{}", 100)} {
		f.Add(k, "p")
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0", ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := newRedis(c, WithPrefix("fz:"))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, key, name string) {
		p := &core.Policy{Name: name, Limits: []core.Limit{core.PerSecond(1), core.PerMinute(5)}}
		keys, err := s.Keys(p, key)
		if p.Validate() != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Len(t, keys, 2)
		for _, k := range keys {
			require.Len(t, k, len("fz:")+2+tagLen+2+4)
			require.Equal(t, slot(keys[0]), slot(k))
			if len(key) >= 8 {
				require.NotContains(t, k, key)
			}
		}
	})
}

// TestScriptChoice pins which script serves which policy shape, so a
// specialised script cannot silently drop out of use (the differential
// tests pass with the generic ones too: TestGenericScripts forces them).
func TestScriptChoice(t *testing.T) {
	s := &redisStore{}
	for a := core.GCRA; a <= core.SlidingWindowCounter; a++ {
		one := mustPolicy(t, core.Policy{Name: "one", Algorithm: a, Limits: []core.Limit{core.PerMinute(10)}})
		two := mustPolicy(t, core.Policy{Name: "two", Algorithm: a, Limits: []core.Limit{core.PerHour(100), core.PerMinute(10)}})
		c1, err := s.compile(one)
		require.NoError(t, err)
		c2, err := s.compile(two)
		require.NoError(t, err)
		require.NotNil(t, single[a], a.String())
		if bakeable[a] != "" {
			// its own copy, the constants written in (bake.go)
			assert.Same(t, bake(string(algoLetters[a]), bakeable[a], unbaked(t, s, one)), c1.script, "%s: one limit", a)
			assert.Empty(t, c1.tail)
		} else {
			assert.Same(t, single[a], c1.script, "%s: one limit", a)
		}
		want := generic[a]
		if multi[a] != nil {
			want = multi[a]
		}
		if bakeableMulti[a] != "" {
			want = bake("multi-"+string(algoLetters[a]), bakeableMulti[a], unbaked(t, s, two))
			assert.Empty(t, c2.tail)
		}
		assert.Same(t, want, c2.script, "%s: two limits", a)
	}
	assert.NotNil(t, multi[core.GCRA], "two-limit GCRA has its own script")
	assert.NotNil(t, multi[core.FixedWindow], "two-limit fixed window has its own script")
	assert.Len(t, allScripts, len(generic)+len(single)+2+2+2+18, "Preload loads every script (and elastic.go's two takes and two refunds, "+
		"and the verbs': Peek, Charge and Refund of four algorithms, Reserve of two, the log's Charge, Refund and read, Reset)")
}
