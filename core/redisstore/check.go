package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/limitkit/limitkit/core"
)

// minRedisVersion is the oldest Redis server [Store.Check] accepts: 5.0,
// the first whose scripts replicate their effects by default (the scripts
// read TIME before they write). Valkey reports a compatible redis_version.
const minRedisVersion = "5.0.0"

// CheckError is the error of [Store.Check]: which server failed which
// step, and why. Unwrap gives go-redis's error, so core.ClassifyError
// tells a refused connection from a timeout.
type CheckError struct {
	// Addr is the server's address ("host:port"), or the client's seed
	// addresses when no server could be listed.
	Addr string
	// Step is what failed: "connect", "version", "load scripts",
	// "cluster state" or "list servers".
	Step string
	// Err is the cause.
	Err error
	// Hint says what to do about it.
	Hint string
}

// Error implements error: "redisstore: Check: <addr>: <step>: <err> (<hint>)".
func (e *CheckError) Error() string {
	msg := fmt.Sprintf("redisstore: Check: %s: %s: %v", e.Addr, e.Step, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *CheckError) Unwrap() error { return e.Err }

// Check implements [Store.Check].
func (s *redisStore) Check(ctx context.Context) error {
	switch c := s.client.(type) {
	case *redis.Client:
		return s.checkServer(ctx, c.Options().Addr, c, false)
	case *redis.ClusterClient:
		var n atomic.Int64 // fn runs concurrently, once per master
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n.Add(1)
			return s.checkServer(ctx, m.Options().Addr, m, true)
		})
		if err == nil && n.Load() == 0 {
			err = errors.New("the cluster lists no master")
		}
		return listErr(strings.Join(c.Options().Addrs, ","), err)
	case *redis.Ring:
		err := c.ForEachShard(ctx, func(ctx context.Context, sh *redis.Client) error {
			return s.checkServer(ctx, sh.Options().Addr, sh, false)
		})
		return listErr(ringAddrs(c), err)
	}
	return s.checkServer(ctx, "redis", s.client, false)
}

// listErr keeps a server's *CheckError and names the seeds for an error
// of the client itself (no server reachable to list the others).
func listErr(seeds string, err error) error {
	if err == nil {
		return nil
	}
	var ce *CheckError
	if errors.As(err, &ce) {
		return ce
	}
	return &CheckError{Addr: seeds, Step: "list servers", Err: err, Hint: connHint(err)}
}

func ringAddrs(r *redis.Ring) string {
	var addrs []string
	for name, a := range r.Options().Addrs {
		addrs = append(addrs, name+"="+a)
	}
	slices.Sort(addrs)
	return strings.Join(addrs, ",")
}

// scripter is what checkServer needs of one server's client.
type scripter interface {
	Ping(ctx context.Context) *redis.StatusCmd
	Info(ctx context.Context, sections ...string) *redis.StringCmd
	ClusterInfo(ctx context.Context) *redis.StringCmd
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	redis.Scripter
}

func (s *redisStore) checkServer(ctx context.Context, addr string, c scripter, cluster bool) error {
	fail := func(step string, err error, hint string) error {
		return &CheckError{Addr: addr, Step: step, Err: err, Hint: hint}
	}
	if err := c.Ping(ctx).Err(); err != nil {
		return fail("connect", err, connHint(err))
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fail("version", err, connHint(err))
	}
	v := infoField(info, "redis_version")
	if v == "" {
		return fail("version", errors.New("INFO server has no redis_version"), "is this a Redis server?")
	}
	if !versionAtLeast(v, minRedisVersion) {
		return fail("version", fmt.Errorf("server runs Redis %s", v), "limitkit needs Redis "+minRedisVersion+" or later; upgrade the server")
	}
	if cluster {
		ci, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return fail("cluster state", err, connHint(err))
		}
		if st := infoField(ci, "cluster_state"); st != "ok" {
			return fail("cluster state", fmt.Errorf("cluster_state:%s", st), "the cluster cannot serve every slot; check CLUSTER INFO and CLUSTER NODES")
		}
	}
	hashes := make([]string, 0, len(allScripts))
	for _, sc := range allScripts {
		if err := sc.rs.Load(ctx, c).Err(); err != nil {
			return fail("load scripts", err, scriptHint(err))
		}
		hashes = append(hashes, sc.rs.Hash())
	}
	ok, err := c.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		return fail("load scripts", err, scriptHint(err))
	}
	for i, e := range ok {
		if !e {
			return fail("load scripts", fmt.Errorf("script %s missing after SCRIPT LOAD", hashes[i]), "is a proxy in front of Redis routing commands to several servers?")
		}
	}
	if s.logger != nil {
		if w := persistenceWarning(ctx, c); w != "" {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "redisstore: Check: "+w, slog.String("addr", addr))
		}
	}
	return nil
}

// persistenceWarning says what a restart of the server can forget under
// its persistence settings, or "" when AOF is on and fsynced (or CONFIG
// is refused: nothing to judge).
func persistenceWarning(ctx context.Context, c scripter) string {
	cfg := map[string]string{}
	for _, name := range []string{"appendonly", "appendfsync", "save"} {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return ""
		}
		v, ok := m[name]
		if !ok {
			return ""
		}
		cfg[name] = v
	}
	switch {
	case cfg["appendonly"] == "yes" && cfg["appendfsync"] == "no":
		return "appendfsync no: a crash of this server may lose the last ~30 s of writes, and their quota is admitted again; set appendfsync everysec"
	case cfg["appendonly"] == "yes":
		return ""
	case strings.TrimSpace(cfg["save"]) == "":
		return `persistence is off (appendonly no, save ""): a restart of this server forgets every limit's state, and every key gets its full quota again; set appendonly yes and appendfsync everysec`
	}
	return "only RDB snapshots (appendonly no, save \"" + cfg["save"] + "\"): a crash of this server forgets what was consumed since the last snapshot (up to the save interval), and that quota is admitted again; set appendonly yes and appendfsync everysec"
}

// connHint says what to do about a failure to talk to a server.
func connHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "invalid password"):
		return "authentication failed: give the user and password in the client options or the URL, redis://user:password@host:port"
	case strings.Contains(msg, "NOPERM"):
		return "the ACL user lacks a permission: it needs +ping +info +@scripting and read/write on the key prefix"
	case strings.Contains(msg, "LOADING"):
		return "Redis is still loading its dataset; retry when it is done"
	}
	switch core.ClassifyError(err) {
	case "connection":
		return "nothing answers there: is Redis running at that address, and is the host, port and network right?"
	case "timeout":
		return "no answer within the deadline: is Redis overloaded or paused, is a firewall dropping packets, or is the check's deadline too short?"
	}
	return "see the error"
}

func scriptHint(err error) string {
	if h := connHint(err); h != "see the error" {
		return h
	}
	return "the server refused the scripts: is scripting disabled (a managed Redis that forbids EVAL, or an ACL without +@scripting)?"
}

// infoField returns the value of "name:value" in an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// versionAtLeast compares dotted versions numerically ("7.0.15" >=
// "5.0.0"); a part that is not a number counts as 0.
func versionAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := part(a, i), part(b, i)
		if x != y {
			return x > y
		}
	}
	return true
}

func part(p []string, i int) int {
	if i >= len(p) {
		return 0
	}
	n, err := strconv.Atoi(p[i])
	if err != nil {
		return 0
	}
	return n
}
