package rls

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limitkit/limitkit/core"
	"go.yaml.in/yaml/v3"
)

// Bounds on a configuration: a file (or directory) beyond them is refused
// with an error naming the bound, so a hostile or runaway file costs bounded
// time and memory at load.
const (
	maxConfigBytes  = 16 << 20 // per file, and in total for a directory
	maxConfigFiles  = 1024
	maxDepth        = 32     // nested descriptors levels
	maxRules        = 20_000 // descriptors in all files
	maxKeyBytes     = 1024   // a descriptor's key or value in a file
	maxRequestsUnit = 1<<31 - 1
)

// Config is a loaded set of rate limit configuration files in
// envoyproxy/ratelimit's format: one domain per file, nested descriptors,
// rate_limit (unit, requests_per_unit, unlimited, name, replaces),
// shadow_mode and detailed_metric, plus limitkit's extensions (see the
// package doc). Build one with [LoadConfig] or [ParseConfig]; the zero
// Config holds no domain, so every request is answered OK with no limit.
// A Config is immutable once built and safe to share between goroutines
// and Servers.
type Config struct {
	domains map[string]*node
	rules   []*rule
}

type node struct {
	children map[string]*node // by "key_value", or "key" for a key without value
	wild     []wildEntry      // the children whose "key_value" has a '*', in file order
	rule     *rule
	share    string // share_threshold: the child's wildcard pattern (value part)
}

type wildEntry struct {
	key   string
	parts []string
}

// rule is a rate_limit of the configuration.
type rule struct {
	fullKey   string // domain.key_value.key... as the reference names it
	name      string
	replaces  []string
	unlimited bool
	shadow    bool
	detailed  bool
	rpu       uint32
	unit      unit
	// the limitkit policy (nil when unlimited or rpu is 0)
	policy *core.Policy
	// the answers' current_limit (shared by every answer: read-only) and
	// X-Ratelimit-Limit value
	current  *pb.RateLimitResponse_RateLimit
	limitHdr string
}

type yamlReplaces struct {
	Name string `yaml:"name"`
}

type yamlRateLimit struct {
	RequestsPerUnit *int64         `yaml:"requests_per_unit"`
	Unit            string         `yaml:"unit"`
	Unlimited       bool           `yaml:"unlimited"`
	Name            string         `yaml:"name"`
	Replaces        []yamlReplaces `yaml:"replaces"`
	// limitkit's extensions
	Algorithm string `yaml:"algorithm"`
	Burst     int64  `yaml:"burst"`
	FailMode  string `yaml:"fail_mode"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	Metadata       map[string]any   `yaml:"metadata"`
}

type yamlRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

// LoadConfig reads path: one YAML file, or a directory whose *.yaml and
// *.yml files (not its subdirectories, not hidden files) are each one
// domain, as envoyproxy/ratelimit reads its runtime directory. Two files of
// one domain are refused, as the reference refuses them by default. Every
// error names the file and what to fix; nothing is half-loaded.
func LoadConfig(path string) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("rls: config %w", err)
	}
	var names []string
	if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("rls: config %w", err)
		}
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				continue
			}
			names = append(names, filepath.Join(path, n))
		}
		if len(names) > maxConfigFiles {
			return nil, fmt.Errorf("rls: config directory %s has %d files; at most %d", path, len(names), maxConfigFiles)
		}
	} else {
		names = []string{path}
	}
	files := make(map[string][]byte, len(names))
	total := 0
	for _, n := range names {
		b, err := readBounded(n, maxConfigBytes-total)
		if err != nil {
			return nil, err
		}
		total += len(b)
		files[n] = b
	}
	return ParseConfig(files)
}

func readBounded(name string, room int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("rls: config %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(room)+1))
	if err != nil {
		return nil, fmt.Errorf("rls: config %s: %w", name, err)
	}
	if len(b) > room {
		return nil, fmt.Errorf("rls: config %s: the configuration exceeds %d bytes; split or shrink it", name, maxConfigBytes)
	}
	return b, nil
}

// ParseConfig builds a Config from files, a map of file name to YAML
// content (the names only label errors). It is what [LoadConfig] does after
// reading, for configurations that do not live in files.
func ParseConfig(files map[string][]byte) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	names := make([]string, 0, len(files))
	total := 0
	for n, b := range files {
		names = append(names, n)
		total += len(b)
	}
	if total > maxConfigBytes {
		return nil, fmt.Errorf("rls: the configuration is %d bytes; at most %d", total, maxConfigBytes)
	}
	slices.Sort(names)
	count := 0
	for _, n := range names {
		if err := c.loadFile(n, files[n], &count); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Config) loadFile(name string, data []byte, count *int) error {
	var root yamlRoot
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("rls: config %s: empty file; want a domain and descriptors", name)
		}
		return fmt.Errorf("rls: config %s: %w", name, err)
	}
	if root.Domain == "" {
		return fmt.Errorf("rls: config %s: config file cannot have empty domain", name)
	}
	if _, dup := c.domains[root.Domain]; dup {
		return fmt.Errorf("rls: config %s: duplicate domain '%s' in config file", name, root.Domain)
	}
	d := &node{children: map[string]*node{}}
	if err := c.loadDescriptors(name, d, root.Domain+".", root.Descriptors, 1, count); err != nil {
		return err
	}
	c.domains[root.Domain] = d
	return nil
}

func (c *Config) loadDescriptors(file string, parent *node, parentKey string, ds []yamlDescriptor, depth int, count *int) error {
	if len(ds) > 0 && depth > maxDepth {
		return fmt.Errorf("rls: config %s: descriptors under %s nest deeper than %d levels", file, parentKey, maxDepth)
	}
	for i := range ds {
		y := &ds[i]
		*count++
		if *count > maxRules {
			return fmt.Errorf("rls: config %s: more than %d descriptors in the configuration", file, maxRules)
		}
		if y.Key == "" {
			return fmt.Errorf("rls: config %s: descriptor has empty key (under %s)", file, parentKey)
		}
		if len(y.Key) > maxKeyBytes || len(y.Value) > maxKeyBytes {
			return fmt.Errorf("rls: config %s: descriptor key or value longer than %d bytes (under %s)", file, maxKeyBytes, parentKey)
		}
		if y.QuotaMode {
			return fmt.Errorf("rls: config %s: %s: quota_mode is not supported by limitkit; remove it (or use shadow_mode)", file, parentKey+y.Key)
		}
		finalKey := y.Key
		if y.Value != "" {
			finalKey += "_" + y.Value
		}
		full := parentKey + finalKey
		if _, dup := parent.children[finalKey]; dup {
			return fmt.Errorf("rls: config %s: duplicate descriptor composite key '%s'", file, full)
		}
		n := &node{children: map[string]*node{}}
		if y.RateLimit != nil {
			r, err := newRule(file, full, y)
			if err != nil {
				return err
			}
			n.rule = r
			c.rules = append(c.rules, r)
		}
		if y.ShareThreshold {
			if !strings.Contains(finalKey, "*") {
				return fmt.Errorf("rls: config %s: share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", file, finalKey)
			}
			n.share = strings.TrimPrefix(finalKey, y.Key+"_")
		}
		if strings.Contains(finalKey, "*") {
			parent.wild = append(parent.wild, wildEntry{key: finalKey, parts: strings.Split(finalKey, "*")})
		}
		if err := c.loadDescriptors(file, n, full+".", y.Descriptors, depth+1, count); err != nil {
			return err
		}
		parent.children[finalKey] = n
	}
	return nil
}

func newRule(file, full string, y *yamlDescriptor) (*rule, error) {
	rl := y.RateLimit
	r := &rule{fullKey: full, name: rl.Name, unlimited: rl.Unlimited, shadow: y.ShadowMode, detailed: y.DetailedMetric}
	u, ok := parseUnit(rl.Unit)
	if rl.Unlimited {
		if ok {
			return nil, fmt.Errorf("rls: config %s: %s: should not specify rate limit unit when unlimited", file, full)
		}
	} else if !ok {
		return nil, fmt.Errorf("rls: config %s: %s: invalid rate limit unit '%s'; want second, minute, hour, day, week, month or year", file, full, rl.Unit)
	}
	r.unit = u
	for _, rp := range rl.Replaces {
		if rp.Name == "" {
			return nil, fmt.Errorf("rls: config %s: %s: should not have an empty replaces entry", file, full)
		}
		if rp.Name == rl.Name {
			return nil, fmt.Errorf("rls: config %s: %s: replaces should not contain name of same descriptor", file, full)
		}
		r.replaces = append(r.replaces, rp.Name)
	}
	var rpu int64
	if rl.RequestsPerUnit != nil {
		rpu = *rl.RequestsPerUnit
	}
	if rpu < 0 || rpu > 1<<32-1 {
		return nil, fmt.Errorf("rls: config %s: %s: requests_per_unit %d is not a uint32", file, full, rpu)
	}
	if rpu > maxRequestsUnit && !rl.Unlimited {
		return nil, fmt.Errorf("rls: config %s: %s: requests_per_unit %d: limitkit counts at most %d per window; use a shorter unit", file, full, rpu, maxRequestsUnit)
	}
	r.rpu = uint32(rpu)
	if !r.unlimited {
		r.current = &pb.RateLimitResponse_RateLimit{Name: r.name, RequestsPerUnit: r.rpu, Unit: r.unit}
		r.limitHdr = strconv.FormatUint(uint64(r.rpu), 10)
	}
	if r.unlimited || rpu == 0 {
		if rl.Algorithm != "" || rl.Burst != 0 || rl.FailMode != "" {
			return nil, fmt.Errorf("rls: config %s: %s: algorithm, burst and fail_mode need a limit (requests_per_unit > 0, not unlimited)", file, full)
		}
		return r, nil
	}
	p := &core.Policy{
		Name:      policyName(full),
		Algorithm: core.FixedWindow,
		Limits:    []core.Limit{{Requests: rpu, Window: time.Duration(unitSeconds(u)) * time.Second, Burst: rl.Burst}},
		Shadow:    y.ShadowMode,
	}
	if rl.Algorithm != "" {
		if err := p.Algorithm.UnmarshalText([]byte(rl.Algorithm)); err != nil {
			return nil, fmt.Errorf("rls: config %s: %s: %w", file, full, err)
		}
	}
	if rl.FailMode != "" {
		if err := p.FailMode.UnmarshalText([]byte(rl.FailMode)); err != nil {
			return nil, fmt.Errorf("rls: config %s: %s: %w", file, full, err)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("rls: config %s: %s: %w", file, full, err)
	}
	r.policy = p
	return r, nil
}

// policyName is a core policy name for a rule's full key: the key with
// the characters a name may not hold replaced, prefixed "rls:", and, when
// anything was replaced or cut, a hash of the full key so that two rules
// never share a name.
func policyName(full string) string {
	const max = 64
	var b strings.Builder
	b.WriteString("rls:")
	clean := true
	for i := 0; i < len(full); i++ {
		ch := full[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || strings.IndexByte("_.:/-", ch) >= 0 {
			b.WriteByte(ch)
		} else {
			b.WriteByte('_')
			clean = false
		}
	}
	s := b.String()
	if clean && len(s) <= max {
		return s
	}
	h := sha256.Sum256([]byte(full))
	suffix := "-" + hex.EncodeToString(h[:6])
	if len(s) > max-len(suffix) {
		s = s[:max-len(suffix)]
	}
	return s + suffix
}
