package rules

import (
	"math/bits"

	"github.com/keyrate/keyrate"
)

// This file is the arithmetic of a hot key's batches (package
// internal/hotshard): a batch of n tokens taken at tick t0 to be served
// until t0+Δ is charged to the key's bucket as n tokens plus Δ ticks, its
// cover, and what it did not use is given back in ticks. See
// docs/design/hotkeys.md for why the cover makes serving later than the
// charge safe, and when a give-back is exact.

// Interval returns the rule's ticks per token, I. On a rule of another
// algorithm than keyrate.TokenBucket it is meaningless.
func (p *Rule) Interval() uint64 { return p.interval }

// FillTicks returns the ticks an empty bucket takes to fill, F = Burst·I.
// On a rule of another algorithm than keyrate.TokenBucket it is
// meaningless.
func (p *Rule) FillTicks() uint64 { return p.fill }

// TakeBatch charges n tokens and cover ticks to the token bucket in state
// s at tick now, if the bucket then still holds keep ticks' worth:
//
//	TAT' = max(TAT, now) + n·I + cover,   allowed iff TAT' − now ≤ F − keep
//
// It returns the new state and true, or s and false. It is pure and never
// moves a state backwards; on a rule of another algorithm it refuses.
func (p *Rule) TakeBatch(s State, now uint64, n int, cover, keep uint64) (State, bool) {
	if p.alg != keyrate.TokenBucket || n < 1 || keep > p.fill {
		return s, false
	}
	hi, charge := bits.Mul64(uint64(n), p.interval)
	if hi != 0 || charge > p.fill || cover > p.fill-charge {
		return s, false
	}
	next := max(uint64(s), now) + charge + cover
	if next-now > p.fill-keep || next > maxTicks+p.fill {
		return s, false
	}
	return State(next), true
}

// GiveBack moves the state s back by back ticks, but not below tick floor
// (the state of a bucket that is full at floor), and never forward. A
// store gives back a batch's unused tokens and unused cover with it, at a
// floor no earlier than any reading a spend since the batch was taken
// used (docs/design/hotkeys.md says why that is exact).
//
// A bucket that owes more than its Burst at floor gains nothing, as from
// a refund (Refund): its tokens up to s are promised to reservations whose
// slots have not come, a spend counted at a reading after floor, and
// moving s back would let new requests share a reserved slot.
func (p *Rule) GiveBack(s State, back, floor uint64) State {
	if uint64(s) <= floor || p.pending(s, floor) {
		return s
	}
	if back >= uint64(s)-floor {
		return State(floor)
	}
	return s - State(back)
}
