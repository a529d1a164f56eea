package rules

import (
	"math"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/tick"
)

// This file is the arithmetic of waiting: a reservation is a spend allowed
// past the fill time by at most a maximum wait. With I the ticks per token
// and F the fill time, a reservation of c tokens at tick now moves the
// state as a spend does,
//
//	TAT' = max(TAT, now) + c·I,   allowed iff TAT' − now ≤ F + wait
//
// and its slot, the tick at which the bucket holds the tokens it spent, is
// max(now, TAT' − F). Requests counted at their slots obey the token
// bucket's bound: over any interval of length T at most Burst + Rate·T/Per
// tokens have their slots in it. A reservation is a spend at its slot:
// TAT' is what a spend at the slot would give, and it is allowed there.

// WaitTicks converts a maximum wait to the rule's ticks, clamping it to
// [0, 2^62 − F] ticks so that a state never passes 2^63 (see the package
// documentation). A wait longer than the rule's clock range is that range.
func (p *Rule) WaitTicks(wait time.Duration) uint64 {
	if wait <= 0 {
		return 0
	}
	return min(uint64(min(wait, p.maxNanos))*p.scale, maxTicks-p.fill)
}

// Reserve is Take for a request that may wait: it spends cost tokens from
// state s at tick now for the earliest tick at which the bucket holds
// them, its slot (Slot), if that is at most wait ticks after now
// (WaitTicks) and within the clock range, returning the new state and
// true, or s and false. With a wait of 0 it is exactly Take. It is pure, and never moves a state
// backwards. cost must satisfy CheckCost.
func (p *Rule) Reserve(s State, now uint64, cost int, wait uint64) (State, bool) {
	if p.alg != keyrate.TokenBucket {
		return p.wReserve(s, now, cost, wait)
	}
	return p.ReserveBucket(s, now, cost, wait)
}

// ReserveBucket is Reserve for a token-bucket rule, small enough to be
// inlined: the hot path of a store, for a policy whose OneBucket reports
// true. On a rule of another algorithm its result is meaningless.
func (p *Rule) ReserveBucket(s State, now uint64, cost int, wait uint64) (State, bool) {
	next := max(uint64(s), now) + uint64(cost)*p.interval
	if next-now > p.fill+wait || next > maxTicks+p.fill {
		// Past the wait, or a slot past the clock range, where time
		// stops: that slot never comes.
		return s, false
	}
	return State(next), true
}

// Slot returns the slot of the reservation that left the bucket in state s
// at tick now: the tick at which it holds the tokens spent, now if it
// held them at once. For a denied reservation it is the slot the request
// would have needed, given the unchanged state s and the cost: see
// SlotFor.
func (p *Rule) Slot(s State, now uint64) uint64 {
	if p.alg != keyrate.TokenBucket {
		return p.wSlot(s, now)
	}
	if uint64(s) > now+p.fill {
		return uint64(s) - p.fill
	}
	return now
}

// SlotFor returns the slot a reservation of cost would get from state s at
// tick now, whatever the wait: the tick to compare with a maximum wait
// when Reserve denies it.
func (p *Rule) SlotFor(s State, now uint64, cost int) uint64 {
	if p.alg != keyrate.TokenBucket {
		slot, _, _, _ := p.earliest(s, now, uint64(cost))
		return slot
	}
	return p.Slot(State(max(uint64(s), now)+uint64(cost)*p.interval), now)
}

// pending reports whether the bucket in state s owes more than Burst at
// tick now: a reservation's slot lies ahead (or a change to a smaller limit
// left the key in debt).
func (p *Rule) pending(s State, now uint64) bool {
	if p.alg != keyrate.TokenBucket {
		return p.wPending(s, now)
	}
	return uint64(s) > now+p.fill
}

// Reserve is Take for a request that may wait: it finds the earliest clock
// reading at or after t, its slot, at which every window holds cost
// tokens, and if that is at most wait after t spends them there from every
// window (the request is decided as if made at the slot, so that each
// window counts it at the slot), updating s and returning the slot and -1.
// Otherwise it returns the slot the request would have needed and the
// index of the window that needs the longest wait, leaving s unchanged.
// With a wait of 0 it is exactly Take. A one-window policy's slot is exact
// to the tick (Rule.Reserve); with several windows it is rounded up to a
// whole nanosecond. cost must satisfy CheckCost.
func (rs *Rules) Reserve(s []State, t time.Duration, cost int, wait time.Duration) (slot time.Duration, denied int) {
	if rs.log { // a log never waits
		r := &rs.rules[0]
		if r.logTake(s, r.Ticks(t), cost) {
			return t, -1
		}
		return r.reading(uint64(s[3])), 0
	}
	if len(rs.rules) == 1 {
		r := &rs.rules[0]
		now := r.Ticks(t)
		next, ok := r.Reserve(s[0], now, cost, r.WaitTicks(wait))
		if !ok {
			return r.reading(r.SlotFor(s[0], now, cost)), 0
		}
		s[0] = next
		if at := r.Slot(next, now); at > now {
			return r.reading(at), -1
		}
		return t, -1
	}
	tc := rs.clamp(t) // where the rules count t
	if wait <= 0 {
		if denied = rs.Take(s, tc, cost); denied < 0 {
			return t, -1
		}
		return rs.slotFor(s, tc, cost), denied
	}
	slot, late := tc, -1
	for i := range rs.rules {
		r := &rs.rules[i]
		if at := r.reading(r.SlotFor(s[i], r.Ticks(tc), cost)); at > slot {
			slot, late = at, i
		}
	}
	if late < 0 {
		rs.Take(s, tc, cost) // allowed at once
		return t, -1
	}
	if tick.Delay(slot, tc) > wait {
		return slot, late
	}
	var next [keyrate.MaxLimits]State
	for i := range rs.rules {
		r := &rs.rules[i]
		n, ok := r.Take(s[i], r.Ticks(slot), cost)
		if !ok { // a slot past the clock range, where time stops
			return math.MaxInt64, i
		}
		next[i] = n
	}
	copy(s, next[:len(rs.rules)])
	return slot, -1
}

// Spend is Reserve with no wait, for a store's hot path: Take at the
// reading Reserve counts t at (clamped to the clock range), with Reserve's
// result and no slot.
func (rs *Rules) Spend(s []State, t time.Duration, cost int) (denied int) {
	if len(rs.rules) > 1 && !rs.log {
		t = rs.clamp(t)
	}
	return rs.Take(s, t, cost)
}

// slotFor returns the earliest reading at or after t at which every window
// of s holds cost tokens.
func (rs *Rules) slotFor(s []State, t time.Duration, cost int) time.Duration {
	slot := t
	for i := range rs.rules {
		r := &rs.rules[i]
		slot = max(slot, r.reading(r.SlotFor(s[i], r.Ticks(t), cost)))
	}
	return slot
}

// clamp returns reading t clamped to the rules' clock range, where Ticks
// counts it: a reading before the epoch is the epoch.
func (rs *Rules) clamp(t time.Duration) time.Duration {
	r := &rs.rules[0]
	if t < r.epoch {
		return r.epoch
	}
	if d := t - r.epoch; d < 0 || d > r.maxNanos { // d < 0: the difference overflowed
		return r.epoch + r.maxNanos
	}
	return t
}

// End returns what a reservation records of the states s it left, for
// Cancel to recognise them: window 0's state for a policy of one window,
// and a 64-bit mix of every window's for several.
func (rs *Rules) End(s []State) State {
	if len(s) == 0 {
		return 0
	}
	e := uint64(s[0])
	for i := 1; i < len(s); i++ {
		e = e*0x9E3779B97F4A7C15 + uint64(s[i]) // a polynomial hash, mod 2^64
	}
	return State(e)
}

// Cancel gives back the cost tokens of a reservation whose slot has not
// come, if nothing has changed the key's states since: s holds the states
// at reading t, end what End gave for the states the reservation left, and
// slot its slot. Every window then gives back cost tokens (each state goes
// back to what it was just before the reservation, or later), and Cancel
// reports true. It changes nothing and reports false when the states are
// not those the reservation left (another request spent, reserved,
// refunded or cancelled since, or the key moved to another policy and
// back: giving the tokens back would let a new request share a slot that
// a later reservation holds), when the slot has come (t ≥ slot), or when
// no window owes more than its Burst (as the window that set the slot of
// a reservation still ahead does). It is idempotent: a second Cancel of
// the same reservation finds the states moved. Read t after loading s, so
// that no request decided before s was loaded holds a later reading.
func (rs *Rules) Cancel(s []State, end State, t, slot time.Duration, cost int) bool {
	if len(rs.rules) == 0 || rs.log || cost < 1 || cost > rs.minBurst || rs.End(s) != end || t >= slot || !rs.pending(s, t) {
		return false // a cost no reservation under rs can have, too
	}
	var next [keyrate.MaxLimits]State
	for i := range rs.rules {
		n, ok := rs.rules[i].cancel(s[i], cost)
		if !ok {
			return false
		}
		next[i] = n
	}
	copy(s, next[:len(rs.rules)])
	return true
}

// pending reports whether any window of s owes more than its Burst at
// reading t (see Rule.Refund).
func (rs *Rules) pending(s []State, t time.Duration) bool {
	for i := range rs.rules {
		r := &rs.rules[i]
		if r.pending(s[i], r.Ticks(t)) {
			return true
		}
	}
	return false
}

// Slot returns the slot of a reservation made at reading t that left the
// states s (Reserve's result, recovered from the states): the reading at
// which every window holds the tokens it spent, or t if they all did at
// once.
func (rs *Rules) Slot(s []State, t time.Duration) time.Duration {
	slot := t
	for i := range rs.rules {
		r := &rs.rules[i]
		now := r.Ticks(t)
		if at := r.Slot(s[i], now); at > now {
			slot = max(slot, r.reading(at))
		}
	}
	return slot
}

// SlotFor returns the slot a reservation of cost would get from the states
// s at reading t, whatever the wait: t if every window holds cost now.
func (rs *Rules) SlotFor(s []State, t time.Duration, cost int) time.Duration {
	if len(rs.rules) == 0 {
		return t
	}
	tc := rs.clamp(t)
	slot := rs.slotFor(s, tc, cost)
	if slot <= tc {
		return t
	}
	return slot
}

// Reserved builds the Reservation of a request of cost for key made by lim
// at reading t with maximum wait wait, from the states s after it (the
// new states if reserved, the unchanged ones if not) and Reserve's result.
func (rs *Rules) Reserved(lim Canceler, key string, s []State, t time.Duration, cost int, wait time.Duration, denied int) keyrate.Reservation {
	if len(rs.rules) > 0 {
		t = rs.clamp(t) // the reading the rules decided at: Delay is at most the wait
	}
	switch {
	case rs.policy.Unlimited:
		return NewReservation(lim, key, rs, 0, t, t, wait, cost, true)
	case denied >= 0:
		return NewReservation(lim, key, rs, 0, t, rs.SlotFor(s, t, cost), wait, cost, false)
	case len(rs.rules) == 1: // Slot's loop, for one window
		slot := t
		r := &rs.rules[0]
		if now := r.Ticks(t); r.pending(s[0], now) {
			slot = r.reading(r.Slot(s[0], now))
		}
		return NewReservation(lim, key, rs, s[0], t, slot, wait, cost, true)
	}
	return NewReservation(lim, key, rs, rs.End(s), t, rs.Slot(s, t), wait, cost, true)
}

// Waits reports whether a reservation that left the bucket in state s at
// tick now must wait for its slot: whether its slot is after now.
func (p *Rule) Waits(s State, now uint64) bool { return p.pending(s, now) }

// cancel returns state s with a reservation of cost taken back off it, or
// false if no reservation of cost can have left s.
func (p *Rule) cancel(s State, cost int) (State, bool) {
	if p.alg != keyrate.TokenBucket {
		return p.wCancel(s, cost)
	}
	back := uint64(cost) * p.interval
	if uint64(s) < back {
		return s, false
	}
	return s - State(back), true
}
