package grpclimit

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Defaults of the client interceptors.
const (
	// defaultMaxAttempts is the attempts a call makes at most, the first
	// included, unless [ClientConfig.MaxAttempts] says otherwise.
	defaultMaxAttempts = 3
	// defaultMaxWait is the longest delay the client interceptors wait
	// before a retry unless [ClientConfig.MaxWait] says otherwise: a denial asking
	// for more is returned at once.
	defaultMaxWait = time.Minute
)

// ClientConfig configures [UnaryClientInterceptor] and
// [StreamClientInterceptor]. The zero value makes at most 3 attempts and
// waits at most one minute per retry.
type ClientConfig struct {
	// MaxAttempts bounds the attempts of one call, the first included
	// (default 3); 1 turns retries off. Below 1: the default.
	MaxAttempts int
	// MaxWait is the longest delay waited before a retry (default one
	// minute): a denial asking for more is returned at once. Zero or
	// less: the default.
	MaxWait time.Duration

	// sleep replaces the wait between attempts (default: a timer, cut
	// short when ctx is done). It returns nil once d has passed, or ctx's
	// error; tests set one that advances a manual clock (export_test.go).
	sleep func(ctx context.Context, d time.Duration) error
}

type clientOptions struct {
	maxAttempts int
	maxWait     time.Duration
	sleep       func(context.Context, time.Duration) error
}

func newClientOptions(cfg ClientConfig) *clientOptions {
	o := &clientOptions{maxAttempts: defaultMaxAttempts, maxWait: defaultMaxWait, sleep: sleepCtx}
	if cfg.MaxAttempts >= 1 {
		o.maxAttempts = cfg.MaxAttempts
	}
	if cfg.MaxWait > 0 {
		o.maxWait = cfg.MaxWait
	}
	if cfg.sleep != nil {
		o.sleep = cfg.sleep
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RetryDelay is the wait a failed call's server asked for before a retry:
// for codes.ResourceExhausted and codes.Unavailable, the
// google.rpc.RetryInfo detail's delay, else the grpc-retry-pushback-ms
// value of trailer. ok is false when the server asked for no retry (a
// negative pushback, as grpclimit sends when the call's cost exceeds the
// limit), gave no delay, or err has another code.
func RetryDelay(err error, trailer metadata.MD) (d time.Duration, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable {
		return 0, false
	}
	var pushback []string
	if trailer != nil {
		pushback = trailer[mdPushback]
	}
	if len(pushback) > 0 {
		if ms, err := strconv.ParseInt(pushback[0], 10, 64); err != nil || ms < 0 {
			return 0, false // "-1" or garbage: grpc-go's retry stops on both
		}
	}
	for _, x := range st.Details() {
		if ri, isRetry := x.(*errdetails.RetryInfo); isRetry && ri.GetRetryDelay() != nil {
			if d := ri.GetRetryDelay().AsDuration(); d >= 0 {
				return d, true
			}
		}
	}
	if len(pushback) > 0 {
		ms, _ := strconv.ParseInt(pushback[0], 10, 64)
		return time.Duration(ms) * time.Millisecond, true
	}
	return 0, false
}

// delay is the wait before attempt+1 after err, or false when the call
// should return err: no retry asked for, attempts spent, a delay above
// the maximum or past ctx's deadline.
func (o *clientOptions) delay(ctx context.Context, err error, trailer metadata.MD, attempt int) (time.Duration, bool) {
	if attempt >= o.maxAttempts {
		return 0, false
	}
	d, ok := RetryDelay(err, trailer)
	if !ok || d > o.maxWait {
		return 0, false
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) < d {
		return 0, false // waiting could only end in DeadlineExceeded
	}
	return d, true
}

// wait sleeps d; a done ctx ends it with ctx's status.
func (o *clientOptions) wait(ctx context.Context, d time.Duration) error {
	if err := o.sleep(ctx, d); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// UnaryClientInterceptor returns a client interceptor that retries a
// unary call denied with codes.ResourceExhausted or codes.Unavailable
// after the delay its server asked for ([RetryDelay]: RetryInfo, else the
// grpc-retry-pushback-ms trailer), for callers without a grpc-go retry
// policy (use one or the other: with both, each of grpc-go's attempts
// counts as one here). It makes at most [ClientConfig.MaxAttempts] attempts, waits
// at most [ClientConfig.MaxWait] per retry, and never waits past ctx's deadline: a
// denial whose delay would outlast it is returned at once, and a ctx done
// while waiting ends the call with its status (codes.DeadlineExceeded or
// codes.Canceled). A denial that asks for no retry is returned as is.
// Safe for concurrent use.
func UnaryClientInterceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	o := newClientOptions(cfg)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		var trailer metadata.MD
		// a copy: the caller's slice is not appended to
		withTrailer := append(callOpts[:len(callOpts):len(callOpts)], grpc.Trailer(&trailer))
		for attempt := 1; ; attempt++ {
			trailer = nil
			err := invoker(ctx, method, req, reply, cc, withTrailer...)
			if err == nil {
				return nil
			}
			d, ok := o.delay(ctx, err, trailer, attempt)
			if !ok {
				return err
			}
			if werr := o.wait(ctx, d); werr != nil {
				return werr
			}
		}
	}
}

// StreamClientInterceptor returns the stream counterpart of
// [UnaryClientInterceptor], for streams on which the client sends one
// message (server-streaming and unary-like descriptors: desc.ClientStreams
// false): when the stream fails with a denial asking for a retry before
// its first message arrived, it waits, opens the stream again, sends the
// message again (and CloseSend if it was called), and receives from the
// new stream. A stream that delivered a message is never opened again.
// Client-streaming and bidirectional streams are passed through
// unchanged: their sent messages are not buffered for a replay. The
// message is sent again as given to SendMsg, which grpc-go already
// forbids modifying after the call. A trailers-only denial makes Header
// return nil metadata (grpc-go's behaviour); call Header again after
// RecvMsg to get the retried stream's. Safe for concurrent use.
func StreamClientInterceptor(cfg ClientConfig) grpc.StreamClientInterceptor {
	o := newClientOptions(cfg)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, callOpts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, callOpts...)
		if err != nil || desc.ClientStreams {
			return cs, err
		}
		return &retryStream{cur: cs, o: o, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: callOpts}, nil
	}
}

// retryStream is a stream opened again after a denial of its first
// receive. Its methods follow grpc.ClientStream's concurrency rules.
type retryStream struct {
	mu       sync.Mutex
	cur      grpc.ClientStream
	attempt  int  // attempts made before cur (0: cur is the first)
	received bool // a message arrived: no more retries

	req      any // the message sent, replayed on a retry
	sent     bool
	closed   bool // CloseSend was called, replayed on a retry
	o        *clientOptions
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
}

func (s *retryStream) stream() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Header returns the current stream's header.
func (s *retryStream) Header() (metadata.MD, error) { return s.stream().Header() }

// Trailer returns the current stream's trailer.
func (s *retryStream) Trailer() metadata.MD { return s.stream().Trailer() }

// Context returns the current stream's context.
func (s *retryStream) Context() context.Context { return s.stream().Context() }

// CloseSend closes the current stream's send direction.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cur := s.cur
	s.mu.Unlock()
	return cur.CloseSend()
}

// SendMsg sends m on the current stream and keeps it for a replay.
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	s.req, s.sent = m, true
	cur := s.cur
	s.mu.Unlock()
	return cur.SendMsg(m)
}

// RecvMsg receives from the current stream; a first receive denied with a
// retry delay opens the stream again after the delay.
func (s *retryStream) RecvMsg(m any) error {
	for {
		cur := s.stream()
		err := cur.RecvMsg(m)
		if err == nil {
			s.mu.Lock()
			s.received = true
			s.mu.Unlock()
			return nil
		}
		if err == io.EOF {
			return err
		}
		s.mu.Lock()
		received, attempt := s.received, s.attempt+1
		s.mu.Unlock()
		if received {
			return err
		}
		d, ok := s.o.delay(s.ctx, err, cur.Trailer(), attempt)
		if !ok {
			return err
		}
		if werr := s.o.wait(s.ctx, d); werr != nil {
			return werr
		}
		if rerr := s.reopen(attempt); rerr != nil {
			return rerr
		}
	}
}

// reopen opens the stream again and replays what was sent on it.
func (s *retryStream) reopen(attempt int) error {
	next, err := s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cur, s.attempt = next, attempt
	req, sent, closed := s.req, s.sent, s.closed
	s.mu.Unlock()
	if sent {
		if err := next.SendMsg(req); err != nil && err != io.EOF {
			return err // io.EOF: the stream ended; RecvMsg gives its status
		}
	}
	if closed {
		if err := next.CloseSend(); err != nil {
			return err
		}
	}
	return nil
}
