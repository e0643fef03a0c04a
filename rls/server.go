package rls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/limitkit/limitkit/core"
)

// Bounds on a request: beyond them ShouldRateLimit answers
// InvalidArgument at once, before any store call.
const (
	maxDescriptors   = 128  // descriptors in one request
	maxEntries       = 64   // entries in one descriptor
	maxKeyInline     = 256  // a counter key longer than this is hashed
	maxOverrides     = 1024 // distinct per-descriptor limit overrides kept
	maxCost          = 1 << 31
	maxRequestDomain = 1024
)

// Server answers envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
// from a [Config] over a core.Store: the embedded store (core/memstore),
// Redis (core/redisstore: a node, Sentinel or a Cluster) or the fleet tier
// (core/fleet) in front of Redis. Register it on a grpc.Server with
// pb.RegisterRateLimitServiceServer(grpcServer, srv).
//
// Each rule of the configuration is one core.Limiter (a fixed window aligned
// to the Unix epoch unless the rule names another algorithm); a descriptor's
// counter key is the domain and the request's entries, as the reference's.
// Servers on one Redis with the same configuration share every quota.
//
// The zero Server is not usable; build one with [New]. A Server is safe
// for concurrent use; [Server.Reload] swaps its configuration atomically
// while requests are being answered.
type Server struct {
	pb.UnimplementedRateLimitServiceServer

	store   core.Store
	opts    []core.Option
	clock   core.Clock
	headers bool

	reload sync.Mutex // serializes Reload and Close
	cur    atomic.Pointer[snapshot]
	closed atomic.Bool

	ovMu      sync.Mutex
	overrides map[ovKey]*core.Limiter

	nearLimit func(policy string, hits uint64)
}

// Option configures a [Server] at [New].
type Option func(*Server)

// WithLimiterOptions passes opts to every core.Limiter the Server builds
// (core.WithObserver for metrics and OpenTelemetry, core.WithClock,
// core.WithTimeout, core.WithLogger). The clock also times the answers'
// duration_until_reset, as the reference's does.
func WithLimiterOptions(opts ...core.Option) Option {
	return func(s *Server) { s.opts = append(s.opts, opts...) }
}

// WithHeaders turns the response_headers_to_add on (the default) or off:
// X-Ratelimit-Limit, X-Ratelimit-Remaining and X-Ratelimit-Reset (Unix
// seconds) of the descriptor closest to its limit (the denying one when
// the request is denied), and Retry-After (delta seconds) on a denial,
// spelled as limitkit's HTTP adapters write them.
func WithHeaders(on bool) Option { return func(s *Server) { s.headers = on } }

// WithNearLimit calls f with a rule's policy name ("rls:" and the rule's
// full key, or a limit override's "rls-override:<unit>:<n>") and the hits
// of an admitted descriptor that fell in the rule's near-limit range: above
// floor(0.8 × requests_per_unit) and up to the limit, counted as
// envoyproxy/ratelimit counts its near_limit statistic at its default
// NEAR_LIMIT_RATIO of 0.8 (a charge that starts below the threshold counts
// only its part above it). Hits a request does not consume are not counted:
// a denied request (all or nothing; the reference counts the part of a
// denied charge below the limit), shadow mode's over-limit hits, a store
// failure's fail-mode decision, hits_addend 0 and is_negative_hits. For
// the other algorithms the limit is the rule's bucket (burst, by default
// requests_per_unit) and "used" what the decision's remaining says.
//
// f is called on the request path, synchronously, from many goroutines:
// it must be cheap and safe for concurrent use. cmd/limitkit-rls exports
// it as limitkit_rls_near_limit_total{policy}. nil (the default) computes
// nothing.
func WithNearLimit(f func(policy string, hits uint64)) Option {
	return func(s *Server) { s.nearLimit = f }
}

// nearLimitRatio is the reference's default NEAR_LIMIT_RATIO.
const nearLimitRatio float32 = 0.8

// nearHits is the part of a charge of hits, taking a counter from
// limit-remaining-hits to limit-remaining, above the near-limit threshold,
// computed as the reference computes it (a float32 product, floored).
func nearHits(limit, remaining, hits int64) uint64 {
	if limit <= 0 || hits <= 0 {
		return 0
	}
	threshold := int64(math.Floor(float64(float32(float32(limit) * nearLimitRatio))))
	after := limit - max(remaining, 0)
	before := after - hits
	if after <= threshold {
		return 0
	}
	return uint64(after - max(threshold, before))
}

// reportNear gives WithNearLimit's function the near-limit hits of the
// admitted request's descriptors.
func (s *Server) reportNear(items []item) {
	for i := range items {
		it := &items[i]
		if !it.taken || it.d.Shadowed || it.d.Degraded || it.lim == nil {
			continue
		}
		limit := it.d.Limit.Requests
		if it.d.Limit.Burst > 0 {
			limit = it.d.Limit.Burst
		}
		if n := nearHits(limit, it.d.Remaining, it.cost); n > 0 {
			s.nearLimit(it.lim.Policy().Name, n)
		}
	}
}

type ovKey struct {
	unit unit
	rpu  uint32
}

// snapshot is one configuration with its limiters; requests hold it
// (refs) so that a reload releases the limiters it drops only after the
// requests deciding with them are done.
type snapshot struct {
	cfg     *Config
	lims    map[*rule]*core.Limiter
	byName  map[string]*core.Limiter
	refs    atomic.Int64
	retired atomic.Bool
	once    sync.Once
	retire  func()
}

func (sn *snapshot) release() {
	if sn.refs.Add(-1) == 0 && sn.retired.Load() {
		sn.once.Do(sn.retire)
	}
}

// New returns a Server answering from cfg over store (neither may be nil).
// It builds one core.Limiter per rule; an error says which rule and what
// to fix. The Server does not own store: close it after [Server.Close].
func New(store core.Store, cfg *Config, opts ...Option) (*Server, error) {
	if store == nil {
		return nil, errors.New("rls: New: nil store; pass memstore.New(), redisstore.New(client) or a fleet tier")
	}
	if cfg == nil {
		return nil, errors.New("rls: New: nil Config; build one with LoadConfig or ParseConfig")
	}
	s := &Server{store: store, headers: true, overrides: map[ovKey]*core.Limiter{}}
	for _, o := range opts {
		o(s)
	}
	var probe core.Limiter
	for _, o := range s.opts {
		o(&probe)
	}
	s.clock = probe.Clock()
	if s.clock == nil {
		s.clock = core.SystemClock{}
	}
	sn, err := s.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	sn.refs.Store(1)
	s.cur.Store(sn)
	return s, nil
}

// build makes the limiters of cfg, reusing old's for rules whose policy
// is unchanged (their counters carry on) and taking over the names of
// rules whose limits changed.
func (s *Server) build(cfg *Config, old *snapshot) (*snapshot, error) {
	sn := &snapshot{cfg: cfg, lims: map[*rule]*core.Limiter{}, byName: map[string]*core.Limiter{}}
	var made []*core.Limiter
	fail := func(err error) (*snapshot, error) {
		for _, l := range made {
			l.Release()
		}
		return nil, err
	}
	for _, r := range cfg.rules {
		if r.policy == nil {
			continue
		}
		var prev *core.Limiter
		if old != nil {
			prev = old.byName[r.policy.Name]
		}
		if prev != nil && reflect.DeepEqual(*prev.Policy(), *r.policy) {
			sn.lims[r], sn.byName[r.policy.Name] = prev, prev
			continue
		}
		opts := s.opts
		if prev != nil {
			opts = append(append([]core.Option(nil), s.opts...), core.Replacing(prev))
		}
		l, err := core.NewLimiter(s.store, *r.policy, opts...)
		if err != nil {
			return fail(fmt.Errorf("rls: rule %s: %w", r.fullKey, err))
		}
		made = append(made, l)
		sn.lims[r], sn.byName[r.policy.Name] = l, l
	}
	sn.retire = func() {
		for _, l := range sn.byName {
			if cur := s.cur.Load(); cur != nil && cur != sn && cur.byName[l.Policy().Name] == l {
				continue
			}
			l.Release()
		}
	}
	return sn, nil
}

// Reload replaces the Server's configuration with cfg atomically: a request
// is decided wholly under the old configuration or wholly under the new.
// Rules whose policy is unchanged keep their counters; a rule whose limits
// changed starts the new limits on the same counter key. When cfg cannot be
// served (a rule's policy refused by the store) Reload returns the error
// and the old configuration keeps serving.
func (s *Server) Reload(cfg *Config) error {
	if cfg == nil {
		return errors.New("rls: Reload: nil Config")
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	if s.closed.Load() {
		return core.ErrClosed
	}
	old := s.cur.Load()
	sn, err := s.build(cfg, old)
	if err != nil {
		return err
	}
	sn.refs.Store(1)
	s.cur.Store(sn)
	old.retired.Store(true)
	old.release()
	return nil
}

// Close releases the Server's limiters (their policies' registrations on
// the store). Requests after Close are answered Unavailable. Close is
// idempotent; it does not close the store.
func (s *Server) Close() error {
	s.reload.Lock()
	defer s.reload.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	sn := s.cur.Load()
	sn.retired.Store(true)
	sn.retire = func() {
		for _, l := range sn.byName {
			l.Release()
		}
	}
	sn.release()
	s.ovMu.Lock()
	for _, l := range s.overrides {
		l.Release()
	}
	s.overrides = nil
	s.ovMu.Unlock()
	return nil
}

func (s *Server) acquire() *snapshot {
	for {
		sn := s.cur.Load()
		sn.refs.Add(1)
		if s.cur.Load() == sn {
			return sn
		}
		sn.release()
	}
}

// item is one descriptor of a request being decided.
type item struct {
	lim      *core.Limiter
	limit    *pb.RateLimitResponse_RateLimit // read-only: shared by the answers of a rule
	limitHdr string                          // X-Ratelimit-Limit's value ("" : formatted from limit)
	fixed    bool                            // a fixed window aligned as the reference's
	window   int64
	key      string
	cost     int64
	negative bool
	zero     bool // requests_per_unit 0: every hit is over the limit
	unlim    bool
	name     string
	d        core.Decision
	taken    bool
	over     bool
}

func invalid(format string, a ...any) error {
	return status.Errorf(codes.InvalidArgument, "rls: "+format, a...)
}

// ShouldRateLimit decides a request: every descriptor with a limit is
// charged its hits, all or nothing (when one descriptor is over its limit,
// the descriptors charged before it are refunded and the ones after it are
// only peeked, so a denied request consumes nothing); see the package doc
// for how the answer compares with envoyproxy/ratelimit's.
//
// An empty domain or descriptor list, more than 128 descriptors, more than
// 64 entries in one descriptor, or a limit override with an unknown unit
// is answered with an InvalidArgument error and charges nothing.
func (s *Server) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.closed.Load() {
		return nil, status.Error(codes.Unavailable, "rls: server closed")
	}
	domain := req.GetDomain()
	if domain == "" {
		return nil, invalid("rate limit domain must not be empty")
	}
	if len(domain) > maxRequestDomain {
		return nil, invalid("rate limit domain longer than %d bytes", maxRequestDomain)
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return nil, invalid("rate limit descriptor list must not be empty")
	}
	if len(ds) > maxDescriptors {
		return nil, invalid("%d descriptors in one request; at most %d", len(ds), maxDescriptors)
	}
	for i, d := range ds {
		if len(d.GetEntries()) > maxEntries {
			return nil, invalid("descriptor %d has %d entries; at most %d", i, len(d.GetEntries()), maxEntries)
		}
		if o := d.GetLimit(); o != nil && unitSeconds(unit(o.GetUnit())) == 0 {
			return nil, invalid("descriptor %d: limit override with unknown unit %v", i, o.GetUnit())
		}
	}
	sn := s.acquire()
	defer sn.release()

	var small [smallN]item
	var items []item
	if len(ds) <= smallN {
		items = small[:len(ds)]
	} else {
		items = make([]item, len(ds))
	}
	var replacing map[string]bool
	for i, d := range ds {
		it := &items[i]
		it.cost, it.negative = hits(req, d)
		if o := d.GetLimit(); o != nil {
			u := unit(o.GetUnit())
			it.limit = &pb.RateLimitResponse_RateLimit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: u}
			it.fixed, it.window = true, unitSeconds(u)
			if o.GetRequestsPerUnit() == 0 {
				it.zero = true
				continue
			}
			l, err := s.override(u, o.GetRequestsPerUnit())
			if err != nil {
				return nil, err
			}
			it.lim = l
			it.key = counterKey(domain, d.GetEntries(), nil)
			continue
		}
		r, share := sn.cfg.lookup(domain, d)
		if r == nil {
			continue
		}
		for _, name := range r.replaces {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			replacing[name] = true
		}
		it.name = r.name
		if r.unlimited {
			it.unlim = true
			continue
		}
		it.limit, it.limitHdr = r.current, r.limitHdr
		it.window = unitSeconds(r.unit)
		if r.policy == nil {
			it.zero, it.fixed = true, true
			continue
		}
		it.fixed = r.policy.Algorithm == core.FixedWindow
		it.lim = sn.lims[r]
		it.key = counterKey("", d.GetEntries(), share)
	}
	if replacing != nil {
		for i := range items {
			if it := &items[i]; it.limit != nil && it.name != "" && replacing[it.name] {
				*it = item{}
			}
		}
	}
	s.decide(ctx, items)
	if s.nearLimit != nil {
		s.reportNear(items)
	}
	return s.answer(items), nil
}

// hits is the descriptor's cost as the reference reads it: the
// descriptor's hits_addend when set (0 included), else the request's, 0
// meaning 1. Costs beyond any limit's capacity are clamped (they are over
// any limit either way), so no counter can wrap.
func hits(req *pb.RateLimitRequest, d *rlpb.RateLimitDescriptor) (int64, bool) {
	var n uint64
	if h := d.GetHitsAddend(); h != nil {
		n = h.GetValue()
	} else {
		n = max(1, uint64(req.GetHitsAddend()))
	}
	return int64(min(n, maxCost)), d.GetIsNegativeHits()
}

// decide charges the items all or nothing.
func (s *Server) decide(ctx context.Context, items []item) {
	denied := false
	// deny refunds what the items before i were charged: the request
	// charges nothing
	deny := func(i int) {
		denied = true
		for j := i - 1; j >= 0; j-- {
			if p := &items[j]; p.taken {
				if rd, err := p.lim.Refund(ctx, p.key, p.cost); err == nil {
					p.d.Remaining = rd.Remaining
				}
				p.taken = false
			}
		}
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.zero:
			it.over = it.cost > 0 && !it.negative
			if it.over && !denied {
				deny(i)
			}
			continue
		case it.lim == nil:
			continue
		}
		if it.negative {
			if !denied {
				it.d, _ = it.lim.Refund(ctx, it.key, it.cost)
			} else {
				it.d, _ = it.lim.PeekN(ctx, it.key, 0)
			}
			it.d.Allowed = true
			continue
		}
		if it.cost == 0 || denied {
			// a check that charges nothing: hits 0 asks where the counter
			// stands; after a denial the rest are only reported
			d, _ := it.lim.PeekN(ctx, it.key, it.cost)
			if it.cost == 0 {
				d.Allowed, d.Shadowed = true, false
			}
			it.d, it.over = d, !d.Allowed && !d.Shadowed
			continue
		}
		d, _ := it.lim.AllowN(ctx, it.key, it.cost)
		it.d = d
		if d.Allowed {
			it.taken = true
			continue
		}
		it.over = true
		deny(i)
	}
}

// smallN is how many descriptors an answer holds in one allocation
// (smallAnswer): Envoy's requests carry a few.
const smallN = 4

// smallAnswer is an answer of at most smallN descriptors with its headers,
// allocated at once: the statuses, their durations and the header values
// point into it.
type smallAnswer struct {
	resp  pb.RateLimitResponse
	ptrs  [smallN]*pb.RateLimitResponse_DescriptorStatus
	sts   [smallN]pb.RateLimitResponse_DescriptorStatus
	durs  [smallN]durationpb.Duration
	hptrs [4]*corepb.HeaderValue
	hdrs  [4]corepb.HeaderValue
}

// oneAnswer is the answer of one descriptor (Envoy's commonest request)
// without headers, allocated at once: a quarter of smallAnswer's bytes,
// which the collector would otherwise zero and scan on every decision;
// oneAnswerH is it with room for the headers, two thirds of them
// (BenchmarkShouldRateLimitEmbedded…/1descriptor).
type oneAnswer struct {
	resp pb.RateLimitResponse
	ptrs [1]*pb.RateLimitResponse_DescriptorStatus
	sts  [1]pb.RateLimitResponse_DescriptorStatus
	durs [1]durationpb.Duration
}

// oneAnswerH is a oneAnswer and its headers.
type oneAnswerH struct {
	oneAnswer
	hptrs [4]*corepb.HeaderValue
	hdrs  [4]corepb.HeaderValue
}

func (s *Server) answer(items []item) *pb.RateLimitResponse {
	var (
		resp  *pb.RateLimitResponse
		sts   []pb.RateLimitResponse_DescriptorStatus
		durs  []durationpb.Duration
		hbufs *[4]corepb.HeaderValue
		hptrs []*corepb.HeaderValue
	)
	switch {
	case len(items) == 1:
		var a *oneAnswer
		if s.headers {
			h := new(oneAnswerH)
			a, hbufs, hptrs = &h.oneAnswer, &h.hdrs, h.hptrs[:0]
		} else {
			a = new(oneAnswer)
		}
		resp, sts, durs = &a.resp, a.sts[:], a.durs[:]
		resp.Statuses = a.ptrs[:]
	case len(items) <= smallN:
		a := new(smallAnswer)
		resp, sts, durs = &a.resp, a.sts[:len(items)], a.durs[:len(items)]
		resp.Statuses = a.ptrs[:len(items):len(items)]
		hbufs, hptrs = &a.hdrs, a.hptrs[:0]
	default:
		resp = &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(items))}
		sts = make([]pb.RateLimitResponse_DescriptorStatus, len(items))
		durs = make([]durationpb.Duration, len(items))
	}
	resp.OverallCode = pb.RateLimitResponse_OK
	now := s.clock.Now()
	best := -1
	for i := range items {
		it := &items[i]
		st := &sts[i]
		st.Code = pb.RateLimitResponse_OK
		resp.Statuses[i] = st
		if it.unlim {
			st.LimitRemaining = math.MaxUint32
			continue
		}
		if it.limit == nil {
			continue
		}
		st.CurrentLimit = it.limit
		if it.over {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		} else if !it.zero && !it.d.Shadowed {
			st.LimitRemaining = uint32(min(max(it.d.Remaining, 0), math.MaxUint32))
		}
		durs[i].Seconds = int64(s.untilReset(it, now) / time.Second)
		st.DurationUntilReset = &durs[i]
		if best < 0 || it.over && !items[best].over || !items[best].over && st.LimitRemaining < resp.Statuses[best].LimitRemaining {
			best = i
		}
	}
	if s.headers && best >= 0 {
		if hbufs == nil {
			hbufs = new([4]corepb.HeaderValue)
			hptrs = make([]*corepb.HeaderValue, 0, 4)
		}
		resp.ResponseHeadersToAdd = s.headersFor(&items[best], resp.Statuses[best], now, hbufs, hptrs)
	}
	return resp
}

// untilReset is the reference's duration_until_reset for fixed windows
// (the rest of the epoch-aligned window, in whole seconds of the server's
// clock) and the decision's ResetAfter, rounded up to seconds, otherwise.
func (s *Server) untilReset(it *item, now time.Time) time.Duration {
	if it.fixed {
		sec := now.Unix()
		return time.Duration(it.window-sec%it.window) * time.Second
	}
	return time.Duration(ceilSeconds(it.d.ResetAfter)) * time.Second
}

// headersFor returns the response headers of the binding descriptor, in
// hv (pointed to from ptrs, which has room for 4), their numbers in one
// string.
func (s *Server) headersFor(it *item, st *pb.RateLimitResponse_DescriptorStatus, now time.Time, hv *[4]corepb.HeaderValue, ptrs []*corepb.HeaderValue) []*corepb.HeaderValue {
	reset := st.GetDurationUntilReset().AsDuration()
	var buf [4 * 20]byte
	b := buf[:0]
	var ends [4]int
	if it.limitHdr == "" {
		b = strconv.AppendUint(b, uint64(st.CurrentLimit.GetRequestsPerUnit()), 10)
	}
	ends[0] = len(b)
	b = strconv.AppendUint(b, uint64(st.LimitRemaining), 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, epochSeconds(now, reset), 10)
	ends[2] = len(b)
	n := 3
	if it.over {
		ra := it.d.RetryAfter
		if it.zero || ra == 0 {
			ra = reset
		}
		if secs, ok := retryAfterSeconds(ra); ok {
			b = strconv.AppendInt(b, secs, 10)
			ends[3] = len(b)
			n = 4
		}
	}
	nums := string(b)
	limit := it.limitHdr
	if limit == "" {
		limit = nums[:ends[0]]
	}
	hv[0] = corepb.HeaderValue{Key: headerLimit, Value: limit}
	hv[1] = corepb.HeaderValue{Key: headerRemaining, Value: nums[ends[0]:ends[1]]}
	hv[2] = corepb.HeaderValue{Key: headerReset, Value: nums[ends[1]:ends[2]]}
	if n == 4 {
		hv[3] = corepb.HeaderValue{Key: headerRetryAfter, Value: nums[ends[2]:ends[3]]}
	}
	for i := range n {
		ptrs = append(ptrs, &hv[i])
	}
	return ptrs
}

// override returns the limiter of a per-descriptor limit override: a fixed
// window of rpu per unit, one per (unit, rpu), at most maxOverrides.
func (s *Server) override(u unit, rpu uint32) (*core.Limiter, error) {
	if int64(rpu) > maxRequestsUnit {
		return nil, invalid("limit override of %d requests per unit; at most %d", rpu, maxRequestsUnit)
	}
	k := ovKey{u, rpu}
	s.ovMu.Lock()
	defer s.ovMu.Unlock()
	if s.overrides == nil {
		return nil, status.Error(codes.Unavailable, "rls: server closed")
	}
	if l := s.overrides[k]; l != nil {
		return l, nil
	}
	if len(s.overrides) >= maxOverrides {
		return nil, status.Errorf(codes.ResourceExhausted, "rls: more than %d distinct limit overrides", maxOverrides)
	}
	p := core.Policy{
		Name:      "rls-override:" + u.String() + ":" + strconv.FormatUint(uint64(rpu), 10),
		Algorithm: core.FixedWindow,
		Limits:    []core.Limit{{Requests: int64(rpu), Window: time.Duration(unitSeconds(u)) * time.Second}},
	}
	l, err := core.NewLimiter(s.store, p, s.opts...)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "rls: limit override: %v", err)
	}
	s.overrides[k] = l
	return l, nil
}

// counterKey is a descriptor's counter key, the contract [Config.Match]
// documents: '|' and the client key, so that it is the store key a
// limitkit HTTP middleware with httplimit.WithScope("") gives the same
// client key (httplimit.StoreKey("", client)). The client key is every
// entry's key and value, each length-prefixed ("7:api_key3:abc"), so that
// no two descriptors share a key by accident (a share_threshold pattern,
// '*' and the pattern, in place of the value where share says); domain,
// when not empty (the limit overrides, whose policies span domains), is
// the first segment. A client key longer than maxKeyInline bytes is "~"
// and 32 hex digits of its SHA-256, as httplimit bounds a long client key
// (keyfuncs.Bound): a 1 MB value costs one hash, not 1 MB of store memory.
func counterKey(domain string, entries []*rlpb.RateLimitDescriptor_Entry, share []string) string {
	n := 0
	if domain != "" {
		n += segLen(len(domain))
	}
	for i, e := range entries {
		n += segLen(len(e.GetKey()))
		if share != nil && share[i] != "" {
			n += segLen(1 + len(share[i]))
		} else {
			n += segLen(len(e.GetValue()))
		}
	}
	if n > maxKeyInline {
		h := sha256.New()
		var seg [24]byte
		eachSegment(domain, entries, share, func(prefix []byte, v string) {
			h.Write(prefix)
			io.WriteString(h, v)
		}, seg[:0])
		var sum [sha256.Size]byte
		var out [2 + 32]byte
		out[0], out[1] = '|', '~'
		hex.Encode(out[2:], h.Sum(sum[:0])[:16])
		return string(out[:])
	}
	var buf [1 + maxKeyInline]byte
	b := append(buf[:0], '|')
	if domain != "" {
		b = appendSegment(b, 0, domain)
	}
	for i, e := range entries {
		b = appendSegment(b, 0, e.GetKey())
		if share != nil && share[i] != "" {
			b = appendSegment(b, '*', share[i])
		} else {
			b = appendSegment(b, 0, e.GetValue())
		}
	}
	return string(b)
}

// appendSegment appends one segment of a counter key: the length of
// prefix (0: none) and v in decimal, ':', the prefix and v.
func appendSegment(b []byte, prefix byte, v string) []byte {
	n := len(v)
	if prefix != 0 {
		n++
	}
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ':')
	if prefix != 0 {
		b = append(b, prefix)
	}
	return append(b, v...)
}

// eachSegment calls f with each segment of a counter key as appendSegment
// writes them (its length and prefix in head, built in scratch, then v),
// for hashing a long key without building it.
func eachSegment(domain string, entries []*rlpb.RateLimitDescriptor_Entry, share []string, f func(head []byte, v string), scratch []byte) {
	seg := func(prefix byte, v string) {
		n := len(v)
		if prefix != 0 {
			n++
		}
		head := strconv.AppendInt(scratch[:0], int64(n), 10)
		head = append(head, ':')
		if prefix != 0 {
			head = append(head, prefix)
		}
		f(head, v)
	}
	if domain != "" {
		seg(0, domain)
	}
	for i, e := range entries {
		seg(0, e.GetKey())
		if share != nil && share[i] != "" {
			seg('*', share[i])
		} else {
			seg(0, e.GetValue())
		}
	}
}

// segLen is the length of an n-byte string as writeKey writes it: n in
// decimal, ':' and the n bytes.
func segLen(n int) int {
	d := 1
	for m := n; m >= 10; m /= 10 {
		d++
	}
	return d + 1 + n
}
