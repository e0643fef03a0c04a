package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

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
// Each rule draws from its own capacity limit. The zero Elastic is not
// valid; a nil *Elastic is hard throttling.
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

// SignalEnv is what [Rule.PolicyWith] builds elastic capacity signals on.
type SignalEnv struct {
	// Store holds the capacity limits: for a fleet-wide limit, the store
	// the servers share (Redis, or the fleet tier in front of it); with
	// the embedded store each server has its own.
	Store core.Store
	// InFlight is the counter the middleware maintains (required by
	// max_in_flight; see the adapters' in-flight option).
	InFlight *core.InFlight
	// Options are given to every capacity Limiter (WithClock,
	// WithTimeout, WithLogger, WithObserver).
	Options []core.Option
}

// noRoom is the signal of a policy built without a SignalEnv: never any
// room, so the rule decides exactly as its hard limits.
type noRoom struct{}

func (noRoom) Acquire(context.Context, int64) (bool, error) { return false, nil }

// policy is e as core.Elastic with the placeholder signal (nil for nil).
func (e *Elastic) policy() *core.Elastic {
	if e == nil {
		return nil
	}
	return &core.Elastic{CeilingPercent: e.CeilingPercent, Signal: noRoom{}}
}

// PolicyWith returns the rule's policy, as [Rule.Policy] does, with its
// elastic capacity signals built on env: a capacity limit's Limiter on
// env.Store (policy "capacity:<rule name>", one key), a load signal on
// env.InFlight. Rule.Policy's elastic policy has a signal that never has
// room (the rule then decides as its hard limits): build the Limiters of
// elastic rules from PolicyWith. For a rule without elastic it is Policy.
func (r *Rule) PolicyWith(env SignalEnv) (core.Policy, error) {
	p := r.Policy()
	return p, withSignals(&p, r.Elastic, env)
}

// PolicyWith is [Rule.PolicyWith] for a descriptor.
func (d *Descriptor) PolicyWith(env SignalEnv) (core.Policy, error) {
	p := d.Policy()
	return p, withSignals(&p, d.Elastic, env)
}

func withSignals(p *core.Policy, e *Elastic, env SignalEnv) error {
	if e == nil {
		return nil
	}
	var sigs []core.CapacitySignal
	if e.MaxInFlight > 0 {
		if env.InFlight == nil {
			return fmt.Errorf("rules: %s: elastic max_in_flight needs the middleware's in-flight counter (SignalEnv.InFlight)", p.Name)
		}
		sigs = append(sigs, core.LoadBelow{InFlight: env.InFlight, Max: e.MaxInFlight})
	}
	if e.Capacity.Requests > 0 {
		if env.Store == nil {
			return fmt.Errorf("rules: %s: elastic capacity needs a store for its limit (SignalEnv.Store)", p.Name)
		}
		l, err := core.NewLimiter(env.Store, core.Policy{Name: capacityName(p.Name), Limits: []core.Limit{e.Capacity}, FailMode: core.FailClosed}, env.Options...)
		if err != nil {
			return fmt.Errorf("rules: %s: elastic capacity: %w", p.Name, err)
		}
		c, err := core.NewCapacityLimit(l, "fleet")
		if err != nil {
			return fmt.Errorf("rules: %s: %w", p.Name, err)
		}
		sigs = append(sigs, c)
	}
	if len(sigs) == 1 {
		p.Elastic.Signal = sigs[0]
	} else {
		p.Elastic.Signal = core.AllSignals(sigs...)
	}
	return p.Validate()
}

// capacityName is the capacity limit's policy name: "capacity:<name>",
// shortened with a digest to core's 64 bytes.
func capacityName(name string) string {
	n := "capacity:" + name
	if len(n) <= 64 {
		return n
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("capacity:%s:%016x", name[:64-9-17], h.Sum64())
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
		if err != nil || math.IsNaN(f) || f <= 1 || f > float64(core.MaxCeilingPercent)/100 {
			if err == nil {
				return 0, fmt.Errorf("ceiling %q must be above 1x and at most %dx", s, core.MaxCeilingPercent/100)
			}
			return 0, bad
		}
		return int(math.Round(f * 100)), nil
	}
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	n, err := strconv.Atoi(t)
	if err != nil {
		return 0, bad
	}
	if n <= 100 || n > core.MaxCeilingPercent {
		return 0, fmt.Errorf("ceiling %q must be above 100%% and at most %d%% (200%% lets each limit be exceeded up to twice)", s, core.MaxCeilingPercent)
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
