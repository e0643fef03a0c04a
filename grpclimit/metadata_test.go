package grpclimit_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/grpclimit"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

// TestTransportCopiesHeader checks what the unary interceptor's pooled
// header maps rely on: the stream grpc-go puts in a call's context is
// recognised as its own transport stream, and that stream copies the map
// and values SetHeader is given before returning (a map changed after
// SetHeader reaches the client unchanged). A grpc-go upgrade that renames
// the stream or keeps the map fails here.
func TestTransportCopiesHeader(t *testing.T) {
	var mu sync.Mutex
	var copies, checked bool
	probe := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		st := grpc.ServerTransportStreamFromContext(ctx)
		mu.Lock()
		copies, checked = grpclimit.CopiesHeader(st), true
		mu.Unlock()
		md := metadata.MD{"x-kept": {"original"}, "x-gone": {"here"}}
		if err := grpc.SetHeader(ctx, md); err != nil {
			return nil, err
		}
		md["x-kept"][0] = "changed"
		md["x-added"] = []string{"late"}
		delete(md, "x-gone")
		return h(ctx, req)
	}
	cc := bufServer(t, []grpc.ServerOption{grpc.UnaryInterceptor(probe)}, "203.0.113.7")[0]
	r := call(t, cc, sayMethod)
	if r.st.Err() != nil {
		t.Fatal(r.st.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	if !checked || !copies {
		t.Fatalf("grpc-go's server transport stream not recognised (checked %v)", checked)
	}
	if got := r.header.Get("x-kept"); !slices.Equal(got, []string{"original"}) {
		t.Fatalf("x-kept %q: the transport kept the map's values", got)
	}
	if got := r.header.Get("x-gone"); !slices.Equal(got, []string{"here"}) {
		t.Fatalf("x-gone %q: the transport kept the map", got)
	}
	if got := r.header.Get("x-added"); len(got) != 0 {
		t.Fatalf("x-added %q: the transport kept the map", got)
	}
	if grpclimit.CopiesHeader(&keepStream{}) {
		t.Fatal("a test stream taken for grpc-go's transport stream")
	}
}

// keepStream is a server transport stream that keeps every header map
// it is given, as test streams and wrappers may.
type keepStream struct{ hdrs []metadata.MD }

func (s *keepStream) Method() string                  { return sayMethod }
func (s *keepStream) SetHeader(md metadata.MD) error  { s.hdrs = append(s.hdrs, md); return nil }
func (s *keepStream) SendHeader(md metadata.MD) error { return nil }
func (s *keepStream) SetTrailer(md metadata.MD) error { return nil }

// TestKeptHeaderStaysIntact: a stream other than grpc-go's own may keep
// the map it is given, so each call's map is its own: after later calls,
// the first call's map still says what it said.
func TestKeptHeaderStaysIntact(t *testing.T) {
	clock := core.NewManualClock(t0)
	ic := grpclimit.MustNew(newLimiter(t, 5, clock)).UnaryServerInterceptor()
	st := &keepStream{}
	ctx := benchCtx(&benchStream{})
	ctx = grpc.NewContextWithServerTransportStream(ctx, st)
	for range 3 {
		if _, err := ic(ctx, wrapperspb.String("hi"), benchInfo, echo); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.hdrs) != 3 {
		t.Fatalf("%d headers set, want 3", len(st.hdrs))
	}
	for i, md := range st.hdrs {
		want := metadata.MD{"x-ratelimit-limit": {"5"}, "x-ratelimit-remaining": {strconv.Itoa(4 - i)}, "x-ratelimit-reset": {strconv.Itoa(1_700_000_012 + 12*i)}}
		if len(md) != len(want) {
			t.Fatalf("call %d: header %q, want %q", i+1, map[string][]string(md), map[string][]string(want))
		}
		for k, v := range want {
			if !slices.Equal(md[k], v) {
				t.Fatalf("call %d: header %q, want %q", i+1, map[string][]string(md), map[string][]string(want))
			}
		}
	}
}

// TestConcurrentHeadersExact: concurrent calls over grpc-go's transport
// (pooled header maps) each receive their own decision's remaining count:
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
