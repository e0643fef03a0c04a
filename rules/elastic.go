package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/limitkit/limitkit/core"
)

// Elastic is a rule's (or descriptor's) elastic throttling, written
//
//	elastic: {ceiling: 200%, capacity: "5000 per 1m", max_in_flight: 200}
//
// (see core.Elastic for the semantics, the guarantees and the fairness
// trade-off). ceiling is a percentage above 100 ("250%", or 250) or a
// multiple ("2.5x"). At least one capacity signal is required: capacity,
// a limit on the elastic admissions of the rule fleet-wide (a hard
// core.CapacityLimit in the store the application shares, GCRA), and/or
// max_in_flight, room while at most that many requests are in flight on
// this server (core.LoadBelow over the middleware's counter). With both,
// both must have room (load first). In defaults it applies to every rule;
// a rule writes elastic: off to opt out.
//
// Each rule draws from its own capacity limit. The signals are built by
// [Signals], attached with [Set.WithSignals]; until then an elastic rule's
// policy has a signal that never has room, and decides as its hard
// limits. The zero Elastic is not valid; a nil *Elastic is hard
// throttling.
type Elastic struct {
	// CeilingPercent is core.Elastic's: 200 admits up to twice each limit.
	CeilingPercent int
	// Capacity is the rule's fleet-wide capacity limit for elastic
	// admissions; the zero Limit means none.
	Capacity core.Limit
	// MaxInFlight is the in-flight threshold of the load signal; 0 means
	// none.
	MaxInFlight int64
}

// SignalEnv is what [NewSignals] builds elastic capacity signals on.
type SignalEnv struct {
	// Store holds the capacity limits: for a fleet-wide limit, the store
	// the servers share (Redis, or the fleet tier in front of it); with
	// the embedded store each server has its own.
	Store core.Store
	// InFlight is the counter the middleware maintains (required by
	// max_in_flight; see httplimit.WithInFlight).
	InFlight *core.InFlight
	// Options are given to every capacity Limiter (WithClock,
	// WithTimeout, WithLogger, WithObserver).
	Options []core.Option
}

// Signals builds and keeps the capacity signals of elastic rules: one
// capacity Limiter per rule and capacity limit (policy
// "capacity:<rule>:<digest of the limit>" on env.Store, one key), and the
// load signal on env.InFlight. Attach it to a Set with [Set.WithSignals],
// after every load or reload: a rule whose capacity limit did not change
// keeps its capacity Limiter (and its state) across reloads, so a
// [Live] swap keeps the rule's Limiter too. Build one with [NewSignals];
// it is safe for concurrent use.
type Signals struct {
	env  SignalEnv
	mu   sync.Mutex
	caps map[string]capEntry // by capacity policy name
	gen  uint64              // publications of a Live (see retain)
}

// capEntry is a capacity signal and its Limiter, and the Signals' gen
// when a set last got it.
type capEntry struct {
	c   *core.CapacityLimit
	lim *core.Limiter
	gen uint64
}

// NewSignals returns the signals builder over env.
func NewSignals(env SignalEnv) *Signals {
	env.Options = slices.Clone(env.Options)
	return &Signals{env: env, caps: map[string]capEntry{}}
}

// WithSignals returns a copy of s whose elastic rules and descriptors
// decide with their capacity signals built by sig (nil: none, every
// elastic rule decides as its hard limits, as in a Set fresh from Load).
// It fails, naming the rule, when a rule needs what sig's env lacks (a
// store for capacity, an in-flight counter for max_in_flight).
func (s *Set) WithSignals(sig *Signals) (*Set, error) {
	out := *s
	out.sig = sig
	out.rules = slices.Clone(s.rules)
	out.descriptors = slices.Clone(s.descriptors)
	for i := range out.rules {
		r := &out.rules[i]
		sg, err := sig.signal(r.Name, r.Elastic)
		if err != nil {
			return nil, err
		}
		r.signal = sg
	}
	for i := range out.descriptors {
		d := &out.descriptors[i]
		sg, err := sig.signal(d.Name(), d.Elastic)
		if err != nil {
			return nil, err
		}
		d.signal = sg
	}
	return &out, nil
}

// noRoom is the signal of a policy without Signals: never any room, so
// the rule decides exactly as its hard limits.
type noRoom struct{}

func (noRoom) Acquire(context.Context, int64) (bool, error) { return false, nil }

// policy is e as core.Elastic with signal (noRoom when nil); nil for nil.
func (e *Elastic) policy(signal core.CapacitySignal) *core.Elastic {
	if e == nil {
		return nil
	}
	if signal == nil {
		signal = noRoom{}
	}
	return &core.Elastic{CeilingPercent: e.CeilingPercent, Signal: signal}
}

// signal is the capacity signal of the elastic rule name (nil for a hard
// rule or a nil sig).
func (sig *Signals) signal(name string, e *Elastic) (core.CapacitySignal, error) {
	if e == nil || sig == nil {
		return nil, nil
	}
	var sigs []core.CapacitySignal
	if e.MaxInFlight > 0 {
		if sig.env.InFlight == nil {
			return nil, fmt.Errorf("rules: %s: elastic max_in_flight needs the middleware's in-flight counter (SignalEnv.InFlight)", name)
		}
		sigs = append(sigs, core.LoadBelow{InFlight: sig.env.InFlight, Max: e.MaxInFlight})
	}
	if e.Capacity.Requests > 0 {
		c, err := sig.capacity(name, e.Capacity)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, c)
	}
	if len(sigs) == 1 {
		return sigs[0], nil
	}
	return core.AllSignals(sigs...), nil
}

// capacity returns the capacity signal of rule name with limit l, built
// once.
func (sig *Signals) capacity(name string, l core.Limit) (*core.CapacityLimit, error) {
	if sig.env.Store == nil {
		return nil, fmt.Errorf("rules: %s: elastic capacity needs a store for its limit (SignalEnv.Store)", name)
	}
	pname := capacityName(name, l)
	sig.mu.Lock()
	defer sig.mu.Unlock()
	if e, ok := sig.caps[pname]; ok {
		e.gen = sig.gen
		sig.caps[pname] = e
		return e.c, nil
	}
	lim, err := core.NewLimiter(sig.env.Store, core.Policy{Name: pname, Limits: []core.Limit{l}, FailMode: core.FailClosed}, sig.env.Options...)
	if err != nil {
		return nil, fmt.Errorf("rules: %s: elastic capacity: %w", name, err)
	}
	c, err := core.NewCapacityLimit(lim, "fleet")
	if err != nil {
		lim.Release()
		return nil, fmt.Errorf("rules: %s: %w", name, err)
	}
	sig.caps[pname] = capEntry{c, lim, sig.gen}
	return c, nil
}

// capacityName is the capacity limit's policy name,
// "capacity:<name>:<8 hex digits of the limit>", the name shortened to
// fit core's 64 bytes (with a digest of the whole name): a changed
// capacity is a new policy, so it never meets the old one's table.
func capacityName(name string, l core.Limit) string {
	h := fnv.New64a()
	h.Write([]byte(name + "\x00" + l.String()))
	sum := h.Sum64()
	n := fmt.Sprintf("capacity:%s:%08x", name, uint32(sum))
	if len(n) <= 64 {
		return n
	}
	return fmt.Sprintf("capacity:%s:%016x", name[:64-9-17], sum)
}

// elasticDoc is elastic as written: a mapping, or "off".
type elasticDoc struct {
	off         bool
	Ceiling     ceilingDoc `yaml:"ceiling" json:"ceiling"`
	Capacity    string     `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	MaxInFlight int64      `yaml:"max_in_flight,omitempty" json:"max_in_flight,omitempty"`
}

var elasticKeys = []string{"ceiling", "capacity", "max_in_flight"}

// ceilingDoc is a ceiling as written ("200%", "2x", 200).
type ceilingDoc struct{ text string }

func (c *ceilingDoc) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(`line %d: elastic ceiling is a percentage ("200%%") or a multiple ("2x")`, n.Line)}}
	}
	c.text = n.Value
	return nil
}

func (c *ceilingDoc) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.text)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`elastic ceiling is a percentage ("200%") or a multiple ("2x")`)
	}
	c.text = n.String()
	return nil
}

func (c ceilingDoc) MarshalYAML() (any, error)    { return c.text, nil }
func (c ceilingDoc) MarshalJSON() ([]byte, error) { return json.Marshal(c.text) }

// UnmarshalYAML accepts "off" (or false) and a mapping of the known keys.
func (e *elasticDoc) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.Value == "off" || n.Value == "false") {
		e.off = true
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(`line %d: elastic is a mapping {ceiling: 200%%, capacity: "5000 per 1m"} or off`, n.Line)}}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !contains(elasticKeys, k.Value) {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: elastic: %s", k.Line, unknownField(k.Value, elasticKeys))}}
		}
	}
	type plain elasticDoc
	return n.Decode((*plain)(e))
}

// UnmarshalJSON accepts "off" (or false) and an object of the known keys.
func (e *elasticDoc) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == `"off"` || string(b) == "false" {
		e.off = true
		return nil
	}
	type plain elasticDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*plain)(e)); err != nil {
		return fmt.Errorf(`elastic is an object {"ceiling": "200%%", "capacity": "5000 per 1m"} or "off" (fields: %s): %w`, strings.Join(elasticKeys, ", "), err)
	}
	return nil
}

func (e elasticDoc) MarshalYAML() (any, error) {
	if e.off {
		return "off", nil
	}
	type plain elasticDoc
	return plain(e), nil
}

func (e elasticDoc) MarshalJSON() ([]byte, error) {
	if e.off {
		return []byte(`"off"`), nil
	}
	type plain elasticDoc
	return json.Marshal(plain(e))
}

// parseCeiling reads "200%", "250", "2x", "2.5x" as a percentage.
func parseCeiling(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("ceiling %q: write a percentage above 100%% (\"200%%\") or a multiple above 1 (\"2x\")", s)
	if m, ok := strings.CutSuffix(t, "x"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(m), 64)
		if err != nil || math.IsNaN(f) || f <= 1 || f > float64(maxCeilingPercent)/100 {
			if err == nil {
				return 0, fmt.Errorf("ceiling %q must be above 1x and at most %dx", s, maxCeilingPercent/100)
			}
			return 0, bad
		}
		if pct := int(math.Round(f * 100)); pct > 100 {
			return pct, nil
		}
		return 0, fmt.Errorf("ceiling %q is %s%% in whole percent, not above 100%%: write at least 1.01x", s, strconv.Itoa(int(math.Round(f*100))))
	}
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, bad
	}
	if n <= 100 || n > maxCeilingPercent {
		return 0, fmt.Errorf("ceiling %q must be above 100%% and at most %d%% (200%% lets each limit be exceeded up to twice)", s, maxCeilingPercent)
	}
	return n, nil
}

// resolveElastic turns a written elastic into an Elastic (nil for off),
// reporting problems through fail.
func resolveElastic(d *elasticDoc, fail func(field, msg string)) *Elastic {
	if d.off {
		return nil
	}
	e := &Elastic{MaxInFlight: d.MaxInFlight}
	ok := true
	if d.Ceiling.text == "" {
		fail("elastic", "no ceiling; write e.g. elastic: {ceiling: 200%, capacity: \"5000 per 1m\"}")
		ok = false
	} else if n, err := parseCeiling(d.Ceiling.text); err != nil {
		fail("elastic", err.Error())
		ok = false
	} else {
		e.CeilingPercent = n
	}
	if c := strings.TrimSpace(d.Capacity); c != "" {
		l, err := ParseLimit(c)
		if err != nil {
			fail("elastic", "capacity: "+err.Error())
			ok = false
		} else {
			e.Capacity = l
		}
	}
	if d.MaxInFlight < 0 {
		fail("elastic", fmt.Sprintf("max_in_flight: %d must be > 0 (or left out)", d.MaxInFlight))
		ok = false
	}
	if e.Capacity.Requests == 0 && e.MaxInFlight == 0 && ok {
		fail("elastic", `no capacity signal: write capacity: "5000 per 1m" (the fleet's spare capacity for elastic admissions) and/or max_in_flight: 200 (this server's load)`)
		ok = false
	}
	if !ok {
		return nil
	}
	return e
}

// doc is e as written (nil for nil).
func (e *Elastic) doc() *elasticDoc {
	if e == nil {
		return nil
	}
	d := &elasticDoc{Ceiling: ceilingDoc{strconv.Itoa(e.CeilingPercent) + "%"}, MaxInFlight: e.MaxInFlight}
	if e.Capacity.Requests > 0 {
		d.Capacity = e.Capacity.String()
	}
	return d
}
