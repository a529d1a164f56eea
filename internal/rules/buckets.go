package rules

import "time"

// This file is the arithmetic of a store's hot path for a policy of
// several token-bucket windows (Buckets): Spend's result, computed from one
// clamped reading (Elapsed) window by window (Rule.TakeAt), inlined and
// with no copy of the states, so that a store can check window 0 before it
// takes a key's lock and the other windows under it.

// Buckets reports whether the policy has several windows and every one is
// a token bucket: the case a store may decide with Elapsed and Rule.TakeAt.
// Spend(s, t, cost) is then exactly this: with e = Elapsed(t), window i's
// TakeAt(s[i], e, cost) for i from 0 up; if one denies, Spend returns the
// first that does and leaves s as it was, and otherwise it stores every
// window's new state and returns -1.
func (rs *Rules) Buckets() bool { return rs.buckets }

// Elapsed returns the nanoseconds past the epoch at which Spend counts
// reading t: t clamped to the clock range, a reading before the epoch
// being 0. Every window counts it at tick min(e, its Range)·its Scale
// (Rule.TakeAt), as Ticks counts the clamped reading.
func (rs *Rules) Elapsed(t time.Duration) uint64 {
	r := &rs.rules[0]
	if t <= r.epoch {
		return 0
	}
	// t > epoch: the difference is exact as a uint64 (see Ticks).
	return min(uint64(t)-uint64(r.epoch), uint64(r.maxNanos))
}

// TakeAt is Take for a token-bucket rule at a reading e nanoseconds past
// the epoch, within the clock range (Rules.Elapsed), small enough to be
// inlined. On a rule of another algorithm its result is meaningless.
func (p *Rule) TakeAt(s State, e uint64, cost int) (State, bool) {
	now := min(e, uint64(p.maxNanos)) * p.scale
	next := max(uint64(s), now) + uint64(cost)*p.interval
	if next-now > p.fill {
		return s, false
	}
	return State(next), true
}
