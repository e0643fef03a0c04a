package storetest

import "github.com/limitkit/limitkit/core"

// ApplyVerb applies the verb named by v to the plain state st with core's
// model, what a store must do under its lock or in its script: 'A' a
// decision, 'P' a peek, 'C' a charge, 'R' a refund, 'W' a reservation
// at most maxWait µs ahead, 'X' a reset. now and maxWait are in
// microseconds. The stores' differential verb tests compare with it.
func ApplyVerb(c *core.Compiled, st []int64, v byte, now, cost, maxWait int64) (d core.Decision) {
	switch v {
	case 'A':
		c.DecideTo(&d, st, now, cost)
	case 'P':
		c.PeekTo(&d, st, make([]int64, len(st)), now, cost)
	case 'C':
		c.ChargeTo(&d, st, now, cost)
	case 'R':
		c.RefundTo(&d, st, now, cost)
	case 'W':
		c.ReserveTo(&d, st, now, cost, maxWait)
	case 'X':
		clear(st)
	}
	return d
}
