package conformance

import (
	"math/big"
	"time"

	"github.com/keyrate/keyrate"
)

// WindowModel is the plain reference of a window algorithm
// (keyrate.FixedWindow or keyrate.SlidingWindow) for one key: the costs
// admitted per aligned window, decided by the rules with big
// integers, and the derived figures (RetryAfter, ResetAfter) found by
// search rather than by formula, so that it shares no arithmetic with
// keyrate's packed states. Time is in ticks of 1ns from the store's epoch.
//
// Its rules: with window w = ⌊t/W⌋ and e = t mod W, a request of cost c at
// t is allowed iff no later window than w has counted anything (a
// reservation counted there), and, with q the cost counted in window w
// and p in window w−1,
//
//	fixed window:    q + c ≤ N
//	sliding window:  p·(W − e) + (q + c)·W ≤ N·W
//
// An allowed request counts in its window. Whether a request is allowed
// can only go from false to true as t grows with nothing else spent, so
// the earliest tick it is allowed at is found by binary search.
type WindowModel struct {
	Alg    keyrate.Algorithm
	N      int64
	W      int64
	counts map[int64]int64 // window → cost counted
}

// NewWindowModel returns the model of an empty key under limit l, a
// window algorithm's.
func NewWindowModel(l keyrate.Limit) *WindowModel {
	return &WindowModel{Alg: l.Algorithm, N: int64(l.Rate), W: int64(l.Per), counts: map[int64]int64{}}
}

// last returns the latest window with a count, or -1.
func (m *WindowModel) last() int64 {
	w := int64(-1)
	for k, v := range m.counts {
		if v > 0 && k > w {
			w = k
		}
	}
	return w
}

// Allows reports whether a request of cost c at tick t is allowed.
func (m *WindowModel) Allows(t, c int64) bool {
	w, e := t/m.W, t%m.W
	if m.last() > w {
		return false
	}
	q := m.counts[w]
	if q+c > m.N {
		return false
	}
	if m.Alg == keyrate.FixedWindow {
		return true
	}
	p := m.counts[w-1]
	lhs := new(big.Int).Mul(big.NewInt(p), big.NewInt(m.W-e))
	lhs.Add(lhs, new(big.Int).Mul(big.NewInt(q+c), big.NewInt(m.W)))
	rhs := new(big.Int).Mul(big.NewInt(m.N), big.NewInt(m.W))
	return lhs.Cmp(rhs) <= 0
}

// Earliest returns the earliest tick at or after t at which a request of
// cost c is allowed if nothing else spends.
func (m *WindowModel) Earliest(t, c int64) int64 {
	lo, hi := t, max(t, (m.last()+3)*m.W) // allowed at hi: two windows past any count
	for lo < hi {
		mid := lo + (hi-lo)/2
		if m.Allows(mid, c) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Remaining returns the largest cost allowed at t, 0 if none (by binary
// search: a cost allowed at t leaves every smaller one allowed).
func (m *WindowModel) Remaining(t int64) int64 {
	lo, hi := int64(0), m.N
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if m.Allows(t, mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// FullAt returns the tick from which the key is as a new one: the end of
// the window after the last with a count (whose sliding estimate, and the
// fixed window's debt when carried to another limit, it weighs on), or 0
// if nothing is counted.
func (m *WindowModel) FullAt() int64 {
	w := m.last()
	if w < 0 {
		return 0
	}
	return (w + 2) * m.W
}

// ResetAt returns the tick from which the key allows N again: FullAt for
// the sliding window; for the fixed window, the end of the last window
// with a count, or 0 if nothing is counted.
func (m *WindowModel) ResetAt() int64 {
	w := m.last()
	if w < 0 || m.Alg == keyrate.SlidingWindow {
		return m.FullAt()
	}
	return (w + 1) * m.W
}

// Take decides a request of cost c at t, counting it if allowed.
func (m *WindowModel) Take(t, c int64) bool {
	if !m.Allows(t, c) {
		return false
	}
	m.counts[t/m.W] += c
	return true
}

// Reserve counts a request of cost c at its earliest tick at or after t if
// that is at most wait after t, and returns that tick.
func (m *WindowModel) Reserve(t, c, wait int64) (slot int64, ok bool) {
	slot = m.Earliest(t, c)
	if slot-t > wait {
		return slot, false
	}
	m.counts[slot/m.W] += c
	return slot, true
}

// Pending reports whether the key's counts are committed past t: a later
// window has counted something, or nothing more is allowed at t than
// after it (a reservation's slot lies ahead).
func (m *WindowModel) Pending(t int64) bool { return m.Earliest(t, 0) > t }

// Refund gives back up to c of what t's window counted, and for the
// sliding window the rest from the window before, unless Pending(t).
func (m *WindowModel) Refund(t, c int64) {
	if m.Pending(t) {
		return
	}
	w := t / m.W
	back := min(c, m.counts[w])
	m.counts[w] -= back
	if m.Alg == keyrate.SlidingWindow {
		m.counts[w-1] -= min(c-back, m.counts[w-1])
	}
}

// Decide returns the Decision a store gives for a request of cost c at t
// that was allowed or not, after it (fields Allowed, Remaining, RetryAfter,
// ResetAfter, WindowResetAfter; the caller fills Policy, Window, Limit).
func (m *WindowModel) Decide(t, c int64, allowed bool) keyrate.Decision {
	d := keyrate.Decision{Allowed: allowed, Remaining: int(m.Remaining(t))}
	d.ResetAfter = time.Duration(max(0, m.ResetAt()-t))
	d.WindowResetAfter = d.ResetAfter
	if !allowed {
		d.RetryAfter = time.Duration(m.Earliest(t, c) - t)
	}
	return d
}
