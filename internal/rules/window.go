package rules

import (
	"math/bits"

	"github.com/keyrate/keyrate"
)

// This file is the arithmetic of the window algorithms (FixedWindow and
// SlidingWindow) over the packed State. With b = bits.Len(N), the count
// bits of the rule, a state packs, from the high bits down,
//
//	idx | p | q      (idx: the window, q: its count, p: that of window idx−1)
//
// each count in b bits, the window index in the 63 − 2b bits above them,
// so that a state stays below 2^63 like a token bucket's. The fixed
// window decides by q alone; it keeps p for Debt, which carries a key's
// state to another limit: a fixed window admits N at the end of one
// window and N more at the start of the next, and a key moved to a token
// bucket then owes both, not the second alone (or a move handed it back
// the first N at once: TestFixedWindowCarryOwesPreviousWindow).
// The zero State is window 0 with nothing counted: a new key at every
// tick. A state never moves backwards (the window index only grows, and
// within a window the counts only grow) but for a refund or a cancel.
//
// A request read at tick t belongs to window ⌊t/W⌋. A state whose window
// lies after that (a reservation counted a later window, or t is a stale
// reading taken before another goroutine moved the state on) admits
// nothing at t: a stale reading never spends from a window it is not in.
//
// The clock range of a window rule is where the window index still fits,
// less two windows for reservations; compile refuses a limit whose range
// is below ten years (minRange): the counts of N and the index of a short
// window share 63 bits.

// unpack returns the window index and counts of state s.
func (p *Rule) unpack(s State) (idx, prev, cur uint64) {
	mask := uint64(1)<<p.cb - 1
	return uint64(s) >> (2 * p.cb), uint64(s) >> p.cb & mask, uint64(s) & mask
}

// pack is the inverse of unpack.
func (p *Rule) pack(idx, prev, cur uint64) State {
	return State(idx<<(2*p.cb) | prev<<p.cb | cur)
}

// view returns state s as seen at tick now: the window it counts in, base
// (the later of now's window and the state's), the offset e of now into
// it (0 if the state's window lies ahead of now: ahead), and the counts
// of the windows before and at base.
func (p *Rule) view(s State, now uint64) (base, e, prev, cur uint64, ahead bool) {
	idx, pv, cu := p.unpack(s)
	if start := idx * p.win; now >= start && now-start < p.win { // now is in the state's window: no division
		return idx, now - start, pv, cu, false
	}
	iw := now / p.win
	switch {
	case iw < idx:
		return idx, 0, pv, cu, true
	case iw == idx:
		return idx, now - iw*p.win, pv, cu, false
	case iw == idx+1:
		return iw, now - iw*p.win, cu, 0, false
	}
	return iw, now - iw*p.win, 0, 0, false
}

// fitsAt returns the least offset e' ≥ e into a window with counts prev
// and cur at which cost more is allowed, or W if none is in the window:
// for the sliding window, prev·(W − e') ≤ (N − cur − cost)·W.
func (p *Rule) fitsAt(e, prev, cur, cost uint64) uint64 {
	if p.fits(e, prev, cur, cost) {
		return e
	}
	if cur+cost > p.n {
		return p.win
	}
	// A sliding window whose previous count weighs too much at e: the
	// least e' with prev·(W − e') ≤ (N − cur − cost)·W.
	hi, lo := bits.Mul64(p.n-cur-cost, p.win)
	q, _ := bits.Div64(hi, lo, prev) // hi < prev: prev·W > (N−cur−cost)·W, as it does not fit at e ≥ 0
	return p.win - q
}

// fits reports whether cost more is allowed at offset e into a window
// with counts prev and cur: fitsAt(e, ...) == e, without its division.
func (p *Rule) fits(e, prev, cur, cost uint64) bool {
	if cur+cost > p.n {
		return false
	}
	if prev == 0 || p.alg == keyrate.FixedWindow {
		return true
	}
	// prev·(W − e) ≤ (N − cur − cost)·W, in 128 bits
	h1, l1 := bits.Mul64(prev, p.win-e)
	h2, l2 := bits.Mul64(p.n-cur-cost, p.win)
	return h1 < h2 || (h1 == h2 && l1 <= l2)
}

// earliest returns the earliest tick at or after now at which cost is
// allowed from state s if nothing else spends, and the window and counts
// it would then count in. It is at most two windows after now's (or the
// state's) window, as cost ≤ N.
func (p *Rule) earliest(s State, now, cost uint64) (slot, base, prev, cur uint64) {
	base, e, prev, cur, _ := p.view(s, now)
	if cost > p.n { // never: a slot past any reading (callers check the cost)
		return maxTicks + p.fill + 1, base, prev, cur
	}
	for {
		if at := p.fitsAt(e, prev, cur, cost); at < p.win {
			return base*p.win + at, base, prev, cur
		}
		base, e, prev, cur = base+1, 0, cur, 0
	}
}

// wTake is Take for a window rule.
func (p *Rule) wTake(s State, now uint64, cost int) (State, bool) {
	base, e, prev, cur, ahead := p.view(s, now)
	if ahead || !p.fits(e, prev, cur, uint64(cost)) {
		return s, false
	}
	return p.pack(base, prev, cur+uint64(cost)), true
}

// wReserve is Reserve for a window rule: the request counts in the window
// of its slot, the earliest tick it is allowed at.
func (p *Rule) wReserve(s State, now uint64, cost int, wait uint64) (State, bool) {
	if wait == 0 {
		return p.wTake(s, now, cost)
	}
	slot, base, prev, cur := p.earliest(s, now, uint64(cost))
	if slot-now > wait || slot > uint64(p.maxNanos) {
		return s, false
	}
	return p.pack(base, prev, cur+uint64(cost)), true
}

// wFullAt returns the tick from which state s is full, as a new key: the
// end of the window after the last it counts anything in (a count weighs
// on the next window too: in the sliding window's estimate, and in the
// fixed window's Debt), or the start of its window if it counts nothing
// (before it, a reading is stale).
func (p *Rule) wFullAt(s State) uint64 {
	idx, prev, cur := p.unpack(s)
	switch {
	case cur > 0:
		return (idx + 2) * p.win
	case prev > 0:
		return (idx + 1) * p.win
	}
	return idx * p.win
}

// wResetAt returns the tick from which state s allows N again: wFullAt
// for the sliding window; for the fixed window, the end of the window it
// counts in (what its Decision's ResetAfter reports: the previous count
// it keeps decides nothing), or the start of its window if that counts
// nothing.
func (p *Rule) wResetAt(s State) uint64 {
	if p.alg == keyrate.SlidingWindow {
		return p.wFullAt(s)
	}
	idx, _, cur := p.unpack(s)
	if cur > 0 {
		return (idx + 1) * p.win
	}
	return idx * p.win
}

// wDebt returns the cost counted against state s at tick now, whole: the
// count of now's window plus the previous window's weighted by the part
// of now's window still to come, ⌈p·(W − e)/W⌉ (the sliding window's
// estimate, for the fixed window too, and not capped at N), plus the
// counts of the windows after now's. It is more than N − Remaining where
// that estimate passes N (for the fixed window, whose rule it is not, and
// for a sliding window whose counts a smaller N kept) and where the state
// counts ahead of now's window (a reservation's later window, or debt
// wCarry spilled past N): the state then no longer holds the counts of
// the windows from now's to the one before its previous, nor of the one
// before now's, and wDebt takes each as N (the one before now's weighted),
// so that a carry owes at least what the key spent (up to 2N more; see
// docs/design/carry.md). A fixed window's previous count counts as N too
// when it is ahead: a state an earlier version of redisbucket's script
// wrote kept none.
func (p *Rule) wDebt(s State, now uint64) uint64 {
	base, e, prev, cur, ahead := p.view(s, now)
	if !ahead {
		if prev == 0 {
			return cur
		}
		return cur + p.weighed(prev, e)
	}
	c := now / p.win
	if p.alg == keyrate.FixedWindow {
		prev = p.n
	}
	hi, gone := bits.Mul64(p.n, base-c-1) // the windows from now's to the one before prev's
	if hi != 0 || gone > maxTicks {
		gone = maxTicks
	}
	return min(gone+prev+cur+p.weighed(p.n, now-c*p.win), maxTicks)
}

// weighed returns the previous window's count prev weighted by the part
// of the current window still to come at offset e: ⌈prev·(W − e)/W⌉.
func (p *Rule) weighed(prev, e uint64) uint64 {
	hi, lo := bits.Mul64(prev, p.win-e)
	q, r := bits.Div64(hi, lo, p.win) // hi < W, as prev < 2^64
	if r != 0 {
		q++
	}
	return q
}

// wRemaining returns the cost a request could spend from s at tick now.
func (p *Rule) wRemaining(s State, now uint64) int {
	_, e, prev, cur, ahead := p.view(s, now)
	if ahead || cur >= p.n {
		return 0
	}
	k := p.n - cur
	if prev > 0 && p.alg == keyrate.SlidingWindow {
		// the least k with prev·(W−e) ≤ (N−cur−k)·W
		q := p.weighed(prev, e)
		if q >= k {
			return 0
		}
		k -= q
	}
	return int(k)
}

// wRefund is Refund for a window rule: the cost comes off the current
// window's count, and for the sliding window what is left of it off the
// previous window's, so that a spend and a refund leave the key as it was.
func (p *Rule) wRefund(s State, now uint64, cost int) State {
	base, e, prev, cur, ahead := p.view(s, now)
	if ahead || !p.fits(e, prev, cur, 0) { // a reservation's slot lies ahead
		return s
	}
	c := uint64(cost)
	back := min(c, cur)
	cur -= back
	if p.alg == keyrate.SlidingWindow {
		more := min(c-back, prev)
		prev -= more
		back += more
	}
	if back == 0 {
		return s // nothing counted that still weighs: as a new key's, unchanged
	}
	return p.pack(base, prev, cur)
}

// wPending reports whether state s is committed past tick now: a
// reservation's slot lies ahead.
func (p *Rule) wPending(s State, now uint64) bool {
	_, e, prev, cur, ahead := p.view(s, now)
	if ahead {
		return prev > 0 || cur > 0
	}
	return !p.fits(e, prev, cur, 0)
}

// wSlot is Slot for a window rule: the earliest tick at which state s's
// counts fit, at which the reservation that left it holds its cost.
func (p *Rule) wSlot(s State, now uint64) uint64 {
	slot, _, _, _ := p.earliest(s, now, 0)
	return slot
}

// wCancel takes cost back off state s's current count, as before the
// reservation that left it, or reports false if s cannot be such a state.
func (p *Rule) wCancel(s State, cost int) (State, bool) {
	idx, prev, cur := p.unpack(s)
	if cur < uint64(cost) {
		return s, false
	}
	return p.pack(idx, prev, cur-uint64(cost)), true
}

// wCarry returns the state at tick now of a key that owes num/den tokens
// (Debt), rounded up, counted as spent at now: N to a window from now's,
// the rest in the windows after it (a sliding window's previous window
// then counts N too), as far as two windows past the clock range; nothing
// in the window before now's.
func (p *Rule) wCarry(num, den, now uint64) State {
	d := num / den
	if num%den != 0 {
		d++
	}
	base := now / p.win
	if d <= p.n {
		return p.pack(base, 0, d)
	}
	full := (d - 1) / p.n // the windows filled before the last
	idx := min(base+full, p.lastWindow()+2)
	return p.pack(idx, p.n, d-full*p.n)
}

// lastWindow returns the last window a reading of p counts in: the window
// of the end of its clock range.
func (p *Rule) lastWindow() uint64 { return uint64(p.maxNanos) / p.win }
