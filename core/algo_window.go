package core

import "math"

// The state layout and the write modes are algo.go's.

const (
	fwCountBits = 31
	fwCountMask = 1<<fwCountBits - 1
)

// fixedWindow: state [(index mod 2^33) << 31 | count]. Windows are aligned
// to the epoch: index = now / W; a calendar limit's are its periods
// (calendar.go: index and end from the zone's local midnights). The window after now's stays in force (a
// caller that read the clock just before a concurrent one rolled the
// window over decides in that window). A stored window further ahead (the
// clock went back) has its count carried into now's window: a clock jump
// never resets a count, and never makes a client wait beyond the end of
// the next window.
func fixedWindow(k *plan, st []int64, now, cost int64, mode int) lres {
	capa := k.capa
	idx := k.index(now)
	count := st[0] & fwCountMask
	if count != 0 {
		stored := uint64(st[0]) >> fwCountBits
		// signed difference of the 33-bit indexes
		if diff := int64((uint64(idx)-stored)<<fwCountBits) >> fwCountBits; diff > 0 {
			count = 0
		} else if diff == -1 {
			// the next window: a caller that read the clock just before a
			// concurrent one rolled the window over; it stays in force
			// (carrying its count back would hand the window's quota out
			// again)
			idx++
		} else if diff < -1 {
			st[0] = int64(uint64(idx)<<fwCountBits) | count
		}
	}
	end := k.end(idx)
	if count+cost <= capa {
		if mode != evalOnly && cost > 0 {
			st[0] = int64(uint64(idx)<<fwCountBits) | (count + cost)
		}
		return lres{ok: true, remaining: capa - count - cost, resetAfter: end - now}
	}
	r := lres{remaining: capa - count, resetAfter: end - now, retryAfter: end - now}
	if cost > capa {
		r.retryAfter = never
	}
	if mode == writeAlways {
		st[0] = int64(uint64(idx)<<fwCountBits) | min(count+cost, capa)
	}
	return r
}

// slidingLog: state [head, ring of C slots]. A slot holds an admitted unit's
// timestamp + 1 (0 = empty); head is the oldest slot, the next to write.
// Timestamps are written as max(now, newest), so the ring is sorted from
// head on. Entries stamped more than a window after now (the clock went
// back) are restamped now first; nearer ones stay (a caller that read the
// clock before a concurrent one). A unit stamped ts is inside the window at now while
// ts > now − W; the request is admitted when the units inside plus cost
// fit C. A decision reads O(log C) slots and writes cost (at most C) of
// them.
func slidingLog(k *plan, st []int64, now, cost int64, mode int) lres {
	w, capa := k.w, k.capa
	ring := st[1:]
	c := int64(len(ring)) // the capacity, or an elastic policy's ceiling
	head := st[0]
	at := func(i int64) int64 { return ring[(head+i)%c] } // i-th oldest
	// first ring position whose value is > v (c when none)
	search := func(v int64) int64 {
		lo, hi := int64(0), c
		for lo < hi {
			m := int64(uint64(lo+hi) >> 1)
			if at(m) > v {
				hi = m
			} else {
				lo = m + 1
			}
		}
		return lo
	}
	if at(c-1)-1-now > w {
		i := search(now + 1)
		fillRing(ring, (head+i)%c, c-i, now+1)
	}
	lo := search(max(now-w+1, 0)) // stored values > cut are inside; empty slots (0) never are
	in := c - lo
	newest := max(at(c-1)-1, 0) // 0 only when the ring is empty
	stamp := max(now, newest)
	if in+cost <= capa {
		if mode != evalOnly && cost > 0 {
			fillRing(ring, head, cost, stamp+1)
			st[0] = (head + cost) % c
		}
		r := lres{ok: true, remaining: capa - in - cost}
		if cost > 0 {
			r.resetAfter = stamp + w - now
		} else if in > 0 {
			r.resetAfter = newest + w - now
		}
		return r
	}
	r := lres{remaining: max(0, capa-in), retryAfter: never}
	if in > 0 {
		// (none inside: a cost above the capacity on a full key, whose
		// stale entries must not make ResetAfter negative)
		r.resetAfter = newest + w - now
	}
	if cost <= capa {
		// the (in+cost−C)-th unit inside the window, from the oldest, must leave
		r.retryAfter = at(lo+in+cost-capa-1) - 1 + w - now
	}
	if mode == writeAlways {
		n := min(cost, capa)
		fillRing(ring, head, n, stamp+1)
		st[0] = (head + n) % c
		r.resetAfter = stamp + w - now
	}
	return r
}

// fillRing sets n (at most len(ring)) slots of ring from slot j on,
// wrapping, to v.
func fillRing(ring []int64, j, n, v int64) {
	a := min(n, int64(len(ring))-j)
	for i := range ring[j : j+a] {
		ring[j+int64(i)] = v
	}
	for i := range ring[:n-a] {
		ring[i] = v
	}
}

// counter reads the sliding counter's buckets: bucket j lives in slot
// j mod (N+1) while j is one of the N+1 latest buckets up to cur.
type counter struct {
	counts     []int64
	cur, slots int64
}

func (c *counter) bucket(j int64) int64 {
	if j > c.cur || j <= c.cur-c.slots || j < 0 {
		return 0
	}
	return c.counts[j%c.slots]
}

// sum of buckets i−N+1..i and the oldest, bucket i−N.
func (c *counter) window(i, n int64) (sum, oldest int64) {
	for j := i - n + 1; j <= i; j++ {
		sum += c.bucket(j)
	}
	return sum, c.bucket(i - n)
}

// slidingCounter: state [cur, N+1 counts]. Buckets last L = W/N; bucket i
// covers [i×L, (i+1)×L). At now, in bucket i with e = now − i×L elapsed, the
// estimate of the cost in the last W is
//
//	(sum of buckets i−N+1..i) + bucket(i−N) × ((L − e) / L)
//
// in float64, in exactly that order (see estimate). Admitted when
// estimate ≤ capacity − cost. A decision reads O(N) counts (N ≤
// maxBuckets). A stored current bucket up to a window after now's (a
// caller that read the clock before a concurrent one) is where the
// decision is made, at its start. One further ahead (the clock went back)
// is first moved back to now's, the whole window with it: the counts keep
// their order and leave the window as now advances.
func slidingCounter(k *plan, st []int64, now, cost int64, mode int) lres {
	n, bl, capa := k.n, k.bl, k.capa
	ctr := counter{counts: st[1:], cur: st[0], slots: n + 1}
	idx := now / bl
	e := now - idx*bl
	if idx < ctr.cur && ctr.cur-idx <= n {
		// a caller that read the clock before a concurrent one moved to a
		// later bucket: decide at the start of the stored current bucket
		idx, e = ctr.cur, 0
	} else if idx < ctr.cur {
		// bucket j moves to j − d: slot i takes the count of slot i + d
		rotate(ctr.counts, (ctr.cur-idx)%ctr.slots)
		st[0], ctr.cur = idx, idx
	}
	sum, oldest := ctr.window(idx, n)
	est := estimate(sum, oldest, bl, e)
	lim := capa - cost
	var r lres
	if est <= float64(lim) {
		r = lres{ok: true, remaining: max(0, int64(math.Floor(float64(capa)-(est+float64(cost)))))}
	} else {
		r = lres{remaining: max(0, int64(math.Floor(float64(capa)-est))), retryAfter: never}
		if cost <= capa {
			r.retryAfter = counterRetry(&ctr, idx, e, n, bl, lim, sum) - now
		}
	}
	write := mode == writeAlways || mode == writeIfOK && r.ok
	add := cost
	if !r.ok {
		add = min(cost, capa)
	}
	if write && add > 0 {
		if idx != ctr.cur {
			// roll forward: clear the slots of buckets cur+1..idx
			for j := max(ctr.cur+1, idx-n); j <= idx; j++ {
				ctr.counts[j%ctr.slots] = 0
			}
			st[0], ctr.cur = idx, idx
		}
		if r.ok {
			ctr.counts[idx%ctr.slots] += add
		} else {
			ctr.counts[idx%ctr.slots] = min(ctr.counts[idx%ctr.slots]+add, capa)
		}
	}
	// reset: the newest bucket holding cost leaves the window at (j+N+1)×L
	if r.ok && cost > 0 || write && add > 0 {
		r.resetAfter = (idx+n+1)*bl - now
	} else {
		for j := idx; j >= idx-n; j-- {
			if ctr.bucket(j) != 0 {
				r.resetAfter = (j+n+1)*bl - now
				break
			}
		}
	}
	return r
}

// rotate moves a[r:] to the front of a, in place.
func rotate(a []int64, r int64) {
	reverse(a[:r])
	reverse(a[r:])
	reverse(a)
}

func reverse(a []int64) {
	for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
		a[i], a[j] = a[j], a[i]
	}
}

// estimate is the sliding counter's weighted sum; the Lua port computes
// sum + oldest * ((L - e) / L) with the same roundings.
func estimate(sum, oldest, bl, e int64) float64 {
	w := float64(float64(bl-e) / float64(bl))
	return float64(sum) + float64(float64(oldest)*w)
}

// counterRetry returns the earliest instant (µs) at or after bucket idx,
// offset e, at which the estimate is at most lim if nothing more is
// consumed. The estimate only falls as time passes, so the instant is found
// segment by segment (one bucket length each) and, inside the segment,
// by solving the linear term and correcting the float rounding. sum is the
// window sum at idx; each later segment's sum is kept up to date by adding
// the bucket that enters and removing the one that leaves, so the search
// is O(N), not O(N²).
func counterRetry(c *counter, idx, e, n, bl, lim, sum int64) int64 {
	for i := idx; i <= idx+n+1; i++ {
		if i > idx {
			sum += c.bucket(i) - c.bucket(i-n)
		}
		if sum > lim {
			continue
		}
		oldest := c.bucket(i - n)
		start := int64(0)
		if i == idx {
			start = e
		}
		if estimate(sum, oldest, bl, start) <= float64(lim) {
			return i*bl + start
		}
		// oldest × (L − x)/L ≤ lim − sum  ⇔  x ≥ L − (lim − sum)×L/oldest
		x := max(start, bl-int64(float64(lim-sum)*float64(bl)/float64(oldest)))
		for x > start && estimate(sum, oldest, bl, x-1) <= float64(lim) {
			x--
		}
		for x < bl && estimate(sum, oldest, bl, x) > float64(lim) {
			x++
		}
		if x < bl {
			return i*bl + x
		}
	}
	return (idx + n + 1) * bl // not reached for cost ≤ capacity
}
