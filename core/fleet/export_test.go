package fleet

import "github.com/limitkit/limitkit/core/internal/schedlag"

// withoutSyncLoop leaves out the background sync loop, which runs on the
// wall clock: a test on a manual clock that syncs by hand decides the
// same whatever the machine's load.
func withoutSyncLoop() Option { return func(c *config) { c.noSyncLoop = true } }

// withoutStarvationGrace counts every timeout as an outage, as in a
// process that is never starved: a test of the breaker's own logic
// (threshold, cool-down, probes) then does not depend on the machine's
// load, which can make the starvation monitor forgive timeouts for
// starveGrace.
func withoutStarvationGrace() Option { return func(c *config) { c.noForgive = true } }

// withoutProbeLoop leaves out the background probe loop, which runs on
// the wall clock: a test on a manual clock calls probeOpen by hand.
func withoutProbeLoop() Option { return func(c *config) { c.noProbeLoop = true } }

// withLagProbe makes the tier read the process's scheduling latency from
// p, whose loop it does not run: a test records the lags it wants (a
// starved process, or none) whatever the machine's load.
func withLagProbe(p *schedlag.Probe) Option { return func(c *config) { c.lag = p } }
