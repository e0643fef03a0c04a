package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The settings [NewClient] gives a client, for what the URL leaves unset.
const (
	// clientDialTimeout bounds a dial that no context bounds sooner: the
	// pool's, a slot-map reload's, [Store.Check]'s. A decision's dial is
	// bounded by its own deadline (50 ms by default).
	clientDialTimeout = 500 * time.Millisecond
	// clientReadTimeout bounds a socket read or write that no context
	// bounds sooner (a slot-map reload, which go-redis runs without a
	// deadline): a frozen node holds a reload that long.
	clientReadTimeout = 500 * time.Millisecond
	// clientClusterReloadInterval is how often a Cluster client reloads
	// its slot map unprompted (go-redis's default is 60 s). The store
	// also asks for a reload after an error that says the map may be
	// stale (see the package doc), so this only bounds how long a
	// change that no decision noticed goes unseen.
	clientClusterReloadInterval = 10 * time.Second
)

// ClientConfig is the go-redis options [NewClient] built from a URL,
// which a [ClientOption] may change before the client is made: exactly
// one of its fields is set, by the URL's kind.
type ClientConfig struct {
	// Node is set for a single node.
	Node *redis.Options
	// Cluster is set for a Redis Cluster.
	Cluster *redis.ClusterOptions
	// Failover is set for a master found through Sentinel.
	Failover *redis.FailoverOptions
}

// ClientOption changes the options [NewClient] built (pool size, TLS,
// credentials, ...) before it makes the client. On a Cluster, the node
// clients get the retry settings NewClient chose, whatever an option
// sets (replace Cluster.NewClient to change them).
type ClientOption func(*ClientConfig)

// NewClient returns a go-redis client tuned for limitkit, from a URL:
//
//	redis://[user:password@]host:port[/db][?options]      one node
//	rediss://...                                           the same over TLS
//	unix://[user:password@]/path/to/redis.sock[?db=n]      one node, a Unix socket
//	redis://[user:password@]host1:port1,host2:port2[?options]
//	                                                       a Redis Cluster from its seeds
//	redis+cluster://[user:password@]host:port[?options]    a Redis Cluster from one seed
//	redis://[user:password@]s1:26379,s2:26379/[db]?master_name=mymaster[&options]
//	                                                       Sentinel: the master mymaster
//
// (rediss+cluster:// is a Cluster over TLS; for Sentinel the URL's user
// and password are Sentinel's, and the master's go in the username and
// password options.) The options are go-redis's URL options
// (redis.ParseURL, ParseClusterURL, ParseFailoverURL: dial_timeout,
// pool_size, max_retries, ...), which win over NewClient's settings
// (except ContextTimeoutEnabled, which the store requires).
//
// What NewClient sets, and why:
//
//   - ContextTimeoutEnabled: the limiter's per-decision deadline (50 ms by
//     default) bounds every socket read, write and dial ([New] requires it).
//   - MaxRetries -1, MinRetryBackoff -1, MaxRetryBackoff -1: go-redis
//     retries nothing (the store never retries a decision, see the package
//     doc; a retry of anything else would only spend the deadline), and on
//     a Cluster these reach every node's client, which go-redis's own
//     copying of ClusterOptions does not do.
//   - DialerRetries 1: a refused dial fails at once and is classified
//     connection (go-redis's default, 5 attempts 100 ms apart, spends the
//     whole deadline and reports a timeout).
//   - DialTimeout 500 ms, ReadTimeout and WriteTimeout
//     500 ms: the bounds of calls no deadline bounds.
//   - On a Cluster, ClusterStateReloadInterval
//     10 s.
//
// The pool keeps go-redis's defaults (10 connections per GOMAXPROCS on a
// node, 5 per node of a Cluster). The caller owns the client and closes
// it. NewClient does no I/O; [Store.Check] tells whether the servers
// answer.
func NewClient(rawURL string, opts ...ClientOption) (redis.UniversalClient, error) {
	cfg, err := parseClientURL(rawURL)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redisstore: NewClient: nil ClientOption")
		}
		o(&cfg)
	}
	switch {
	case cfg.Node != nil && cfg.Cluster == nil && cfg.Failover == nil:
		return redis.NewClient(cfg.Node), nil
	case cfg.Cluster != nil && cfg.Node == nil && cfg.Failover == nil:
		return redis.NewClusterClient(cfg.Cluster), nil
	case cfg.Failover != nil && cfg.Node == nil && cfg.Cluster == nil:
		return redis.NewFailoverClient(cfg.Failover), nil
	}
	return nil, errors.New("redisstore: NewClient: a ClientOption left the ClientConfig with not exactly one of Node, Cluster, Failover set")
}

// parseClientURL builds the tuned options of rawURL (see NewClient).
func parseClientURL(rawURL string) (ClientConfig, error) {
	cfg, err := clientConfigOf(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error's text holds the URL, password included
		}
		return ClientConfig{}, fmt.Errorf("redisstore: NewClient: %w (want redis://host:port, rediss://..., redis://host1:port1,host2:port2 for a Cluster, or ...?master_name=name for Sentinel)", err)
	}
	return cfg, nil
}

// clientConfigOf is parseClientURL's work: the scheme, the seed hosts,
// then the kind of client they name.
func clientConfigOf(rawURL string) (ClientConfig, error) {
	// url.Parse refuses "host1:port1,host2:port2" as a port: take the
	// host list out first
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ClientConfig{}, errors.New("no scheme")
	}
	cluster := false
	switch scheme {
	case "unix":
		return nodeConfig(rawURL)
	case "redis+cluster", "rediss+cluster":
		cluster, scheme = true, strings.TrimSuffix(scheme, "+cluster")
	case "redis", "rediss":
	default:
		return ClientConfig{}, fmt.Errorf("scheme %q", scheme)
	}
	sd, err := seedsOf(scheme, rest)
	if err != nil {
		return ClientConfig{}, err
	}
	u, err := url.Parse(sd.first)
	if err != nil {
		return ClientConfig{}, err
	}
	q := u.Query()
	switch {
	case q.Has("master_name"):
		return failoverConfig(sd.first + sd.extra(u))
	case cluster || len(sd.hosts) > 1 || q.Has("addr"):
		return clusterConfig(u, sd)
	}
	return nodeConfig(sd.first)
}

// seeds are the host list of a URL: first is the URL with the first host
// alone, the one go-redis parses.
type seeds struct {
	hosts []string
	first string
}

// seedsOf splits rest ([userinfo@]hosts[/path][?query], after scheme's
// "://") into its hosts.
func seedsOf(scheme, rest string) (seeds, error) {
	auth, hostsEtc := "", rest
	if i := strings.LastIndex(rest[:indexAny(rest, "/?")], "@"); i >= 0 {
		auth, hostsEtc = rest[:i+1], rest[i+1:]
	}
	end := indexAny(hostsEtc, "/?")
	hosts, tail := strings.Split(hostsEtc[:end], ","), hostsEtc[end:]
	for _, h := range hosts {
		if h == "" {
			return seeds{}, errors.New("an empty host")
		}
		if _, _, err := net.SplitHostPort(h); err != nil && len(hosts) > 1 {
			return seeds{}, fmt.Errorf("seed %q: %w", h, err)
		}
	}
	return seeds{hosts: hosts, first: scheme + "://" + auth + hosts[0] + tail}, nil
}

// extra is the other seeds as go-redis's addr parameters, to append to
// the first seed's URL u.
func (sd seeds) extra(u *url.URL) string {
	var b strings.Builder
	for _, h := range sd.hosts[1:] {
		b.WriteString("&addr=" + url.QueryEscape(h))
	}
	s := b.String()
	if s != "" && u.RawQuery == "" {
		if strings.HasSuffix(sd.first, "?") {
			return s[1:]
		}
		return "?" + s[1:]
	}
	return s
}

// nodeConfig is the tuned options of a one-node URL.
func nodeConfig(rawURL string) (ClientConfig, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return ClientConfig{}, err
	}
	tuneNode(o)
	return ClientConfig{Node: o}, nil
}

// failoverConfig is the tuned options of a Sentinel URL.
func failoverConfig(rawURL string) (ClientConfig, error) {
	o, err := redis.ParseFailoverURL(rawURL)
	if err != nil {
		return ClientConfig{}, err
	}
	tuneFailover(o)
	return ClientConfig{Failover: o}, nil
}

// clusterConfig is the tuned options of a Cluster URL: u (the first
// seed's, database 0 at most) and the other seeds.
func clusterConfig(u *url.URL, sd seeds) (ClientConfig, error) {
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return ClientConfig{}, fmt.Errorf("database %q: a Cluster has only database 0", p)
	}
	u.Path = ""
	o, err := redis.ParseClusterURL(u.String() + sd.extra(u))
	if err != nil {
		return ClientConfig{}, err
	}
	tuneCluster(o)
	return ClientConfig{Cluster: o}, nil
}

// indexAny is strings.IndexAny, or len(s) when none is found.
func indexAny(s, chars string) int {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return i
	}
	return len(s)
}

// tune fills what the URL left unset with NewClient's settings, and sets
// ContextTimeoutEnabled.
func tune(ctxTimeout *bool, maxRetries, dialerRetries *int, minBackoff, maxBackoff, dial, read, write *time.Duration) {
	*ctxTimeout = true
	if *maxRetries == 0 {
		*maxRetries = -1
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{minBackoff, -1}, {maxBackoff, -1}, {dial, clientDialTimeout}, {read, clientReadTimeout}, {write, clientReadTimeout}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
}

func tuneNode(o *redis.Options) {
	tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.MinRetryBackoff, &o.MaxRetryBackoff, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
}

func tuneCluster(o *redis.ClusterOptions) {
	tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.MinRetryBackoff, &o.MaxRetryBackoff, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
	if o.ClusterStateReloadInterval == 0 {
		o.ClusterStateReloadInterval = clientClusterReloadInterval
	}
	// go-redis normalizes ClusterOptions (MinRetryBackoff -1 becomes 0)
	// before copying them into each node's Options, whose own
	// normalization then turns 0 into its 10 ms default: give the node
	// clients the settings as they are now, where they are made.
	maxRetries, dialerRetries, minBackoff, maxBackoff := o.MaxRetries, o.DialerRetries, o.MinRetryBackoff, o.MaxRetryBackoff
	newClient := o.NewClient
	if newClient == nil {
		newClient = redis.NewClient
	}
	o.NewClient = func(no *redis.Options) *redis.Client {
		no.ContextTimeoutEnabled = true
		no.MaxRetries, no.DialerRetries = maxRetries, dialerRetries
		no.MinRetryBackoff, no.MaxRetryBackoff = minBackoff, maxBackoff
		return newClient(no)
	}
}

func tuneFailover(o *redis.FailoverOptions) {
	tune(&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.MinRetryBackoff, &o.MaxRetryBackoff, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
}
