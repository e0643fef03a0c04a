package grpclimit_test

import (
	"context"
	"net"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// recordStream is a server transport stream that records the header
// maps given to it and passes them on to grpc-go's own stream.
type recordStream struct {
	grpc.ServerTransportStream
	mu   sync.Mutex
	hdrs []metadata.MD
}

func (s *recordStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	s.hdrs = append(s.hdrs, md)
	s.mu.Unlock()
	return s.ServerTransportStream.SetHeader(md)
}

// TestTransportLeavesHeaderIntact checks what the shared header maps
// rely on (metadata.go): grpc-go's transport never writes into the map
// SetHeader is given, through the whole call (the handler setting and
// sending headers of its own, the response, the status), and the client
// receives exactly the rate-limit header; two clients whose calls have
// the same triple are given one map. A grpc-go upgrade that writes into
// the map it was given fails here.
func TestTransportLeavesHeaderIntact(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 5, clock), httplimit.WithKey(apiKey(t))).UnaryServerInterceptor()
	rec := &recordStream{}
	wrap := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		rec.ServerTransportStream = grpc.ServerTransportStreamFromContext(ctx)
		return h(grpc.NewContextWithServerTransportStream(ctx, rec), req)
	}
	// the handler adds to the header and sends it, as handlers do
	handler := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := grpc.SetHeader(ctx, metadata.Pairs("x-ratelimit-remaining", "handler's", "x-own", "1")); err != nil {
			return nil, err
		}
		if err := grpc.SendHeader(ctx, metadata.Pairs("x-sent", "2")); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	cc := bufServer(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(wrap, ic, handler)}, "203.0.113.7")[0]
	want := map[string][]string{"x-ratelimit-limit": {"5"}, "x-ratelimit-remaining": {"4"}, "x-ratelimit-reset": {"1700000012"}}
	for _, key := range []string{"alice", "bob"} {
		r := call(t, cc, sayMethod, "x-api-key", key)
		if r.st.Err() != nil {
			t.Fatal(r.st.Err())
		}
		for k, v := range want {
			if got := r.header.Get(k); k != "x-ratelimit-remaining" && !slices.Equal(got, v) ||
				k == "x-ratelimit-remaining" && !slices.Equal(got, []string{"4", "handler's"}) {
				t.Fatalf("%s: client saw %s %q", key, k, got)
			}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.hdrs) != 4 {
		t.Fatalf("%d headers set, want 4", len(rec.hdrs))
	}
	ours := []metadata.MD{rec.hdrs[0], rec.hdrs[2]}
	for _, md := range ours {
		assertMD(t, md, want)
	}
	if reflect.ValueOf(ours[0]).Pointer() != reflect.ValueOf(ours[1]).Pointer() {
		t.Fatal("two calls with one triple were given two maps")
	}
}

// assertMD fails t unless md is exactly want.
func assertMD(t *testing.T, md metadata.MD, want map[string][]string) {
	t.Helper()
	if len(md) != len(want) {
		t.Fatalf("header %q, want %q", map[string][]string(md), want)
	}
	for k, v := range want {
		if !slices.Equal(md[k], v) {
			t.Fatalf("header %q, want %q", map[string][]string(md), want)
		}
	}
}

// keepStream is a server transport stream that keeps every header map
// it is given, as test streams and wrappers may.
type keepStream struct{ hdrs []metadata.MD }

func (s *keepStream) Method() string                  { return sayMethod }
func (s *keepStream) SetHeader(md metadata.MD) error  { s.hdrs = append(s.hdrs, md); return nil }
func (s *keepStream) SendHeader(md metadata.MD) error { return nil }
func (s *keepStream) SetTrailer(md metadata.MD) error { return nil }

// TestSharedHeaderNeverRewritten: a stream other than grpc-go's own may
// keep the map it is given, and calls with the same triple share one map
// (metadata.go), so no map is written once given out: after later calls
// with other triples, every kept map still says what it said, and the
// two keys' calls with one triple were given one map.
func TestSharedHeaderNeverRewritten(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 5, clock), httplimit.WithKey(apiKey(t))).UnaryServerInterceptor()
	st := &keepStream{}
	ctxs := []context.Context{keyCtx(st, "alice"), keyCtx(st, "bob")}
	var want []map[string][]string
	for i := range 3 {
		for _, ctx := range ctxs {
			if _, err := ic(ctx, wrapperspb.String("hi"), benchInfo, echo); err != nil {
				t.Fatal(err)
			}
			want = append(want, map[string][]string{"x-ratelimit-limit": {"5"}, "x-ratelimit-remaining": {strconv.Itoa(4 - i)}, "x-ratelimit-reset": {strconv.Itoa(1_700_000_012 + 12*i)}})
		}
	}
	if len(st.hdrs) != len(want) {
		t.Fatalf("%d headers set, want %d", len(st.hdrs), len(want))
	}
	for i, md := range st.hdrs {
		assertMD(t, md, want[i])
		if i%2 == 1 && reflect.ValueOf(md).Pointer() != reflect.ValueOf(st.hdrs[i-1]).Pointer() {
			t.Fatalf("call %d: the same triple as call %d in another map", i+1, i)
		}
	}
	// more triples than the table has slots, each reset the same (a fixed
	// window, the clock still): some share a slot, whose map is replaced,
	// not rewritten, and never given for another count
	store := memstore.MustNew()
	defer store.Close()
	fw := core.MustNewLimiter(store, core.Policy{Name: "fw", Algorithm: core.FixedWindow, Limits: []core.Limit{core.PerMinute(1000)}}, core.WithClock(clock))
	big := grpclimit.MustNew(fw, httplimit.WithKey(apiKey(t))).UnaryServerInterceptor()
	st = &keepStream{}
	ctx := keyCtx(st, "carol")
	const calls = 700
	for range calls {
		if _, err := big(ctx, wrapperspb.String("hi"), benchInfo, echo); err != nil {
			t.Fatal(err)
		}
	}
	for i, md := range st.hdrs {
		assertMD(t, md, map[string][]string{"x-ratelimit-limit": {"1000"}, "x-ratelimit-remaining": {strconv.Itoa(999 - i)}, "x-ratelimit-reset": {"1700000040"}})
	}
}

// keyCtx is benchCtx with st as the transport stream and key as the API
// key.
func keyCtx(st grpc.ServerTransportStream, key string) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", key))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40001}})
	return grpc.NewContextWithServerTransportStream(ctx, st)
}

// writeStream is a server transport stream that writes into the map it
// is given, which the map's doc forbids.
type writeStream struct{ last metadata.MD }

func (s *writeStream) Method() string { return sayMethod }
func (s *writeStream) SetHeader(md metadata.MD) error {
	s.last = md
	md.Set("x-mine", "1")
	return nil
}
func (s *writeStream) SendHeader(md metadata.MD) error { return nil }
func (s *writeStream) SetTrailer(md metadata.MD) error { return nil }

// TestWrittenSharedHeaderReplaced: a shared map a stream added to is not
// given out again; the next call with its triple gets a new map.
func TestWrittenSharedHeaderReplaced(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 5, clock), httplimit.WithKey(apiKey(t))).UnaryServerInterceptor()
	ws := &writeStream{}
	if _, err := ic(keyCtx(ws, "alice"), wrapperspb.String("hi"), benchInfo, echo); err != nil {
		t.Fatal(err)
	}
	ks := &keepStream{}
	if _, err := ic(keyCtx(ks, "bob"), wrapperspb.String("hi"), benchInfo, echo); err != nil {
		t.Fatal(err)
	}
	assertMD(t, ks.hdrs[0], map[string][]string{"x-ratelimit-limit": {"5"}, "x-ratelimit-remaining": {"4"}, "x-ratelimit-reset": {"1700000012"}})
}

// TestForeignStreamConcurrentHeadersExact: concurrent calls on streams
// other than grpc-go's, each keeping its maps, several keys sharing every
// triple (so the shared maps are read and replaced under -race): every
// map kept says its own decision exactly, each key's calls see every
// remaining count from quota-1 down to 0 once.
func TestForeignStreamConcurrentHeadersExact(t *testing.T) {
	clock := core.NewManualClock(t0)
	const quota, keys, workers = 30, 4, 3
	ic := grpclimit.MustNew(newLimiter(t, quota, clock), httplimit.WithKey(apiKey(t))).UnaryServerInterceptor()
	streams := make([][]*keepStream, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for range workers {
			st := &keepStream{}
			streams[k] = append(streams[k], st)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := keyCtx(st, "key-"+strconv.Itoa(k))
				for range quota / workers {
					if _, err := ic(ctx, wrapperspb.String("hi"), benchInfo, echo); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	for k := range keys {
		var seen []int
		for _, st := range streams[k] {
			for _, md := range st.hdrs {
				rem := md.Get("x-ratelimit-remaining")
				if len(md) != 3 || len(rem) != 1 || !slices.Equal(md.Get("x-ratelimit-limit"), []string{"30"}) {
					t.Fatalf("key %d: header %q", k, map[string][]string(md))
				}
				n, _ := strconv.Atoi(rem[0])
				// full again 2 s per call taken
				if reset := strconv.Itoa(1_700_000_000 + 2*(quota-n)); !slices.Equal(md.Get("x-ratelimit-reset"), []string{reset}) {
					t.Fatalf("key %d: header %q, want reset %s", k, map[string][]string(md), reset)
				}
				seen = append(seen, n)
			}
		}
		slices.Sort(seen)
		if len(seen) != quota {
			t.Fatalf("key %d: %d calls answered, want %d", k, len(seen), quota)
		}
		for i, n := range seen {
			if n != i {
				t.Fatalf("key %d: remaining counts %v, want each of 0..%d once", k, seen, quota-1)
			}
		}
	}
}

// TestForeignStreamHeaderAllocs pins issue 39's bar on a stream other
// than grpc-go's (a test's, a wrapper's): an admitted call whose triple
// was sent before allocates nothing for its header metadata (the whole
// call: the request view only, as without metadata).
func TestForeignStreamHeaderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	st := memstore.MustNew()
	defer st.Close()
	// 1000 a second, a call every 2 ms: the triple repeats
	clock := core.NewManualClock(t0)
	lim := core.MustNewLimiter(st, core.Policy{Name: "bench", Limits: []core.Limit{core.PerSecond(1000)}}, core.WithClock(clock))
	ic := grpclimit.MustNew(lim).UnaryServerInterceptor()
	bs := &benchStream{}
	ctx := benchCtx(bs)
	n := testing.AllocsPerRun(1000, func() {
		clock.Advance(2 * time.Millisecond)
		if _, err := ic(ctx, benchReq, benchInfo, echo); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Fatalf("%.1f allocations per call, want at most 1", n)
	}
	if len(bs.hdr.Get("x-ratelimit-remaining")) != 1 {
		t.Fatalf("no metadata written: %v", bs.hdr)
	}
}

// TestConcurrentHeadersExact: concurrent calls over grpc-go's transport
// (shared header maps) each receive their own decision's remaining count:
// one key's calls see every count from quota-1 down to 0 exactly once.
func TestConcurrentHeadersExact(t *testing.T) {
	clock := core.NewManualClock(t0)
	const quota, workers, per = 40, 8, 5
	ic := grpclimit.MustNew(newLimiter(t, quota, clock), httplimit.WithKey(apiKey(t)))
	cc := bufClient(t, ic, "203.0.113.7")[0]
	var mu sync.Mutex
	var seen []int
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				var hdr metadata.MD
				err := cc.Invoke(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "hot"),
					sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Header(&hdr))
				if err != nil {
					t.Error(err)
					return
				}
				rem := hdr.Get("x-ratelimit-remaining")
				if len(rem) != 1 || !slices.Equal(hdr.Get("x-ratelimit-limit"), []string{"40"}) {
					t.Errorf("header %q", map[string][]string(hdr))
					return
				}
				n, _ := strconv.Atoi(rem[0])
				// full again 1.5 s per call taken, rounded up
				if reset := strconv.Itoa(1_700_000_000 + (3*(quota-n)+1)/2); !slices.Equal(hdr.Get("x-ratelimit-reset"), []string{reset}) {
					t.Errorf("header %q, want reset %s", map[string][]string(hdr), reset)
					return
				}
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(seen)
	for i, n := range seen {
		if n != i {
			t.Fatalf("remaining counts %v, want each of 0..%d once", seen, quota-1)
		}
	}
	if len(seen) != quota {
		t.Fatalf("%d calls answered, want %d", len(seen), quota)
	}
}

// TestLargeCountsInHeader: numbers beyond the shared texts (a remaining
// count of 10000 or more, a reset delta of as many seconds) are
// formatted per call, alone or together.
func TestLargeCountsInHeader(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		name               string
		limit              core.Limit
		opts               []httplimit.Option
		limitS, rem, reset string
	}{
		{"large remaining", core.Per(1<<20, 366*day), nil, "1048576", "1048575", "1700000031"},
		{"large delta", core.Per(10, 366*day), []httplimit.Option{httplimit.WithResetDelta()}, "10", "9", "3162240"},
		{"both large", core.Per(20000, 366*day), []httplimit.Option{httplimit.WithResetDelta(),
			httplimit.WithCost(func(keyfuncs.Request) int64 { return 9000 })}, "20000", "11000", "14230080"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.MustNew()
			defer st.Close()
			lim := core.MustNewLimiter(st, core.Policy{Name: "big", Limits: []core.Limit{c.limit}}, core.WithClock(core.NewManualClock(t0)))
			ic := grpclimit.MustNew(lim, c.opts...).UnaryServerInterceptor()
			ks := &keepStream{}
			ctx := grpc.NewContextWithServerTransportStream(benchCtx(&benchStream{}), ks)
			if _, err := ic(ctx, wrapperspb.String("hi"), benchInfo, echo); err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{"x-ratelimit-limit": {c.limitS}, "x-ratelimit-remaining": {c.rem}, "x-ratelimit-reset": {c.reset}}
			if len(ks.hdrs) != 1 || len(ks.hdrs[0]) != 3 {
				t.Fatalf("headers %q, want %q", ks.hdrs, want)
			}
			for k, v := range want {
				if !slices.Equal(ks.hdrs[0][k], v) {
					t.Fatalf("header %q, want %q", map[string][]string(ks.hdrs[0]), want)
				}
			}
		})
	}
}
