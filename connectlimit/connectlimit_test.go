package connectlimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limitkit/limitkit/connectlimit"
	"github.com/limitkit/limitkit/core"
	"github.com/limitkit/limitkit/core/memstore"
	"github.com/limitkit/limitkit/httplimit"
	"github.com/limitkit/limitkit/keyfuncs"
)

const (
	say    = "/limitkit.example.Echo/Say"
	count  = "/limitkit.example.Echo/Count"
	health = "/grpc.health.v1.Health/Check"
)

var t0 = time.Unix(1_700_000_000, 0)

type sv = wrapperspb.StringValue

// server serves Say (unary: echoes, or fails with the code its input
// names), Count (server streaming: three messages) and a health check,
// each behind ic, on HTTP/1.1 and h2c.
func server(t testing.TB, ic *connectlimit.Interceptor) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	opt := connect.WithInterceptors(ic)
	mux.Handle(say, connect.NewUnaryHandler(say, func(ctx context.Context, r *connect.Request[sv]) (*connect.Response[sv], error) {
		if c, err := strconv.Atoi(r.Msg.GetValue()); err == nil && c > 0 {
			return nil, connect.NewError(connect.Code(c), errors.New("asked to fail"))
		}
		if r.Msg.GetValue() == "panic" {
			panic("asked to panic")
		}
		if id, ok := httplimit.Identity(ctx); ok && r.Msg.GetValue() == "identity" {
			return connect.NewResponse(wrapperspb.String(id)), nil
		}
		return connect.NewResponse(r.Msg), nil
	}, opt))
	mux.Handle(count, connect.NewServerStreamHandler(count, func(_ context.Context, _ *connect.Request[sv], s *connect.ServerStream[sv]) error {
		for i := range 3 {
			if err := s.Send(wrapperspb.String(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	}, opt))
	mux.Handle(health, connect.NewUnaryHandler(health, func(_ context.Context, r *connect.Request[sv]) (*connect.Response[sv], error) {
		return connect.NewResponse(wrapperspb.String("SERVING")), nil
	}, opt))
	s := httptest.NewUnstartedServer(mux)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// h2c is an HTTP client that speaks only HTTP/2 without TLS.
func h2c(t testing.TB) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func http1(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func limiter(t testing.TB, clk core.Clock, n int64) *core.Limiter {
	t.Helper()
	st, err := memstore.New(memstore.WithClock(clk))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return core.MustNewLimiter(st, core.Policy{Name: "say", Limits: []core.Limit{core.PerMinute(n)}}, core.WithClock(clk))
}

// TestConnectClients: a real Connect client (Connect, gRPC and gRPC-Web
// protocols, over HTTP/1.1 and HTTP/2) gets 5 calls a minute with the
// X-RateLimit headers, then CodeResourceExhausted with RetryInfo and
// Retry-After; each protocol and transport is a fresh server.
func TestConnectClients(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(testing.TB) *http.Client
		opts   []connect.ClientOption
	}{
		{"connect/http1", http1, nil},
		{"connect/h2c", h2c, nil},
		{"grpc/h2c", h2c, []connect.ClientOption{connect.WithGRPC()}},
		{"grpcweb/http1", http1, []connect.ClientOption{connect.WithGRPCWeb()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := core.NewManualClock(t0)
			ic, err := connectlimit.New(limiter(t, clk, 5), httplimit.WithClock(clk))
			require.NoError(t, err)
			s := server(t, ic)
			c := connect.NewClient[sv, sv](tc.client(t), s.URL+say, tc.opts...)
			for i := range 5 {
				resp, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
				require.NoError(t, err, "call %d", i)
				assert.Equal(t, "hi", resp.Msg.GetValue())
				assert.Equal(t, "5", resp.Header().Get("X-Ratelimit-Limit"))
				assert.Equal(t, strconv.Itoa(4-i), resp.Header().Get("X-Ratelimit-Remaining"))
			}
			_, err = c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
			retry := requireExhausted(t, err)
			assert.Equal(t, 12*time.Second, retry, "GCRA of 5 a minute: one call every 12 s")

			// health is never limited
			hc := connect.NewClient[sv, sv](tc.client(t), s.URL+health, tc.opts...)
			for range 10 {
				_, err := hc.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("")))
				require.NoError(t, err)
			}
			clk.Advance(retry)
			_, err = c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
			require.NoError(t, err, "admitted again after RetryInfo's delay")
		})
	}
}

// requireExhausted asserts err is the denial and returns its RetryInfo
// delay.
func requireExhausted(t *testing.T, err error) time.Duration {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, connect.CodeResourceExhausted, ce.Code(), "%v", err)
	assert.Equal(t, "5", ce.Meta().Get("X-Ratelimit-Limit"))
	assert.Equal(t, "0", ce.Meta().Get("X-Ratelimit-Remaining"))
	var retry time.Duration
	for _, d := range ce.Details() {
		v, err := d.Value()
		require.NoError(t, err)
		if ri, ok := v.(*errdetails.RetryInfo); ok {
			retry = ri.GetRetryDelay().AsDuration()
		}
	}
	require.Positive(t, retry, "RetryInfo detail")
	assert.Equal(t, strconv.Itoa(int((retry+time.Second-1)/time.Second)), ce.Meta().Get("Retry-After"))
	return retry
}

// TestGRPCGoClient: a grpc-go client against the Connect handler sees
// the headers as metadata and the denial as codes.ResourceExhausted with
// RetryInfo.
func TestGRPCGoClient(t *testing.T) {
	clk := core.NewManualClock(t0)
	ic, err := connectlimit.New(limiter(t, clk, 5), httplimit.WithClock(clk))
	require.NoError(t, err)
	s := server(t, ic)
	cc, err := grpc.NewClient(strings.TrimPrefix(s.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	for i := range 5 {
		var hdr metadata.MD
		out := new(sv)
		require.NoError(t, cc.Invoke(context.Background(), say, wrapperspb.String("hi"), out, grpc.Header(&hdr)), "call %d", i)
		assert.Equal(t, []string{strconv.Itoa(4 - i)}, hdr.Get("x-ratelimit-remaining"))
	}
	var hdr, tr metadata.MD
	err = cc.Invoke(context.Background(), say, wrapperspb.String("hi"), new(sv), grpc.Header(&hdr), grpc.Trailer(&tr))
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var retry time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri.GetRetryDelay().AsDuration()
		}
	}
	assert.Equal(t, 12*time.Second, retry)
	all := metadata.Join(hdr, tr)
	assert.Equal(t, []string{"12"}, all.Get("retry-after"))
	assert.Equal(t, []string{"0"}, all.Get("x-ratelimit-remaining"))
}

// TestStreamingDecidedOnce: a server-streaming call is one decision,
// whatever it sends, and is denied as a unary call is.
func TestStreamingDecidedOnce(t *testing.T) {
	clk := core.NewManualClock(t0)
	ic, err := connectlimit.New(limiter(t, clk, 2), httplimit.WithClock(clk))
	require.NoError(t, err)
	s := server(t, ic)
	c := connect.NewClient[sv, sv](h2c(t), s.URL+count)
	for range 2 {
		st, err := c.CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("")))
		require.NoError(t, err)
		n := 0
		for st.Receive() {
			n++
		}
		require.NoError(t, st.Err())
		assert.Equal(t, 3, n)
		assert.NotEmpty(t, st.ResponseHeader().Get("X-Ratelimit-Remaining"))
		require.NoError(t, st.Close())
	}
	st, err := c.CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("")))
	require.NoError(t, err)
	for st.Receive() {
		t.Fatal("a denied stream sent a message")
	}
	assert.Equal(t, connect.CodeResourceExhausted, codeOf(st.Err()))
	_ = st.Close()
}

// TestOutcomeCountsByCode: with httplimit.WithOutcome(StatusIn(401))
// only calls answered CodeUnauthenticated count (Connect's mapping of
// the code), and a panic counts too.
func TestOutcomeCountsByCode(t *testing.T) {
	clk := core.NewManualClock(t0)
	ic, err := connectlimit.New(limiter(t, clk, 2), httplimit.WithClock(clk),
		httplimit.WithOutcome(httplimit.Outcome{Count: httplimit.StatusIn(http.StatusUnauthorized)}))
	require.NoError(t, err)
	s := server(t, ic)
	c := connect.NewClient[sv, sv](h2c(t), s.URL+say)
	callCode := func(v string) connect.Code {
		_, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String(v)))
		return codeOf(err)
	}
	for range 5 { // successes and other failures never count
		require.Equal(t, connect.Code(0), codeOf(func() error {
			_, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("ok")))
			return err
		}()))
		require.Equal(t, connect.CodeNotFound, callCode(strconv.Itoa(int(connect.CodeNotFound))))
	}
	unauth := strconv.Itoa(int(connect.CodeUnauthenticated))
	require.Equal(t, connect.CodeUnauthenticated, callCode(unauth))
	require.Equal(t, connect.CodeUnauthenticated, callCode(unauth))
	require.Equal(t, connect.CodeResourceExhausted, callCode("ok"), "two failures spent the quota")
}

// TestConcurrentExactCount: 200 calls of one client from 20 goroutines
// over h2c admit exactly the limit.
func TestConcurrentExactCount(t *testing.T) {
	clk := core.NewManualClock(t0)
	ic, err := connectlimit.New(limiter(t, clk, 37), httplimit.WithClock(clk))
	require.NoError(t, err)
	s := server(t, ic)
	c := connect.NewClient[sv, sv](h2c(t), s.URL+say)
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 10 {
				_, err := c.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("hi")))
				switch codeOf(err) {
				case 0:
					ok.Add(1)
				case connect.CodeResourceExhausted:
					denied.Add(1)
				default:
					t.Errorf("unexpected %v", err)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 37, ok.Load())
	assert.EqualValues(t, 163, denied.Load())
}

// TestKeyFromHeader: httplimit.WithKey reads the call's headers; two
// API keys have two quotas; a call without one falls back to the peer.
func TestKeyFromHeader(t *testing.T) {
	clk := core.NewManualClock(t0)
	byKey, err := keyfuncs.Header("X-Api-Key")
	require.NoError(t, err)
	ic, err := connectlimit.New(limiter(t, clk, 1), httplimit.WithClock(clk), httplimit.WithKey(byKey))
	require.NoError(t, err)
	s := server(t, ic)
	c := connect.NewClient[sv, sv](h2c(t), s.URL+say)
	call := func(key string) connect.Code {
		req := connect.NewRequest(wrapperspb.String("hi"))
		if key != "" {
			req.Header().Set("X-Api-Key", key)
		}
		_, err := c.CallUnary(context.Background(), req)
		return codeOf(err)
	}
	assert.Equal(t, connect.Code(0), call("alice"))
	assert.Equal(t, connect.CodeResourceExhausted, call("alice"))
	assert.Equal(t, connect.Code(0), call("bob"))
	assert.Equal(t, connect.Code(0), call(""))
	assert.Equal(t, connect.CodeResourceExhausted, call(""))
}

// TestConstructionErrors: an option that shapes an HTTP response is a
// construction error naming it.
func TestConstructionErrors(t *testing.T) {
	clk := core.NewManualClock(t0)
	_, err := connectlimit.New(limiter(t, clk, 1), httplimit.WithDenyStatus(http.StatusServiceUnavailable))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WithDenyStatus")
	_, err = connectlimit.New(limiter(t, clk, 1), httplimit.WithKey(nil))
	require.Error(t, err)
}

// codeOf is the call's code, 0 for success (connect.CodeOf(nil) is
// CodeUnknown).
func codeOf(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}
