package conformance

import (
	"fmt"
	"slices"
	"time"

	"github.com/keyrate/keyrate"
)

// CarryInput builds an input for CarryModel readably, for a fuzz target's
// seeds:
//
//	conformance.NewCarryInput(false, []keyrate.Limit{keyrate.PerHour(100)}, p1).
//		AllowN(0, 100).AllowTier(0, 1, 1).AllowN(0, 90).Bytes()
//
// Keys, members and policy slots are numbers: key 0 is "a", slot 0 the
// default, slot s the policy "p<s>". Every limit must be one of
// CarryLimits.
type CarryInput struct {
	b      []byte
	member byte
}

// carryIndex returns l's index in CarryLimits, or panics.
func carryIndex(l keyrate.Limit) byte {
	i := slices.Index(CarryLimits, l)
	if i < 0 {
		panic(fmt.Sprintf("conformance: %v is not one of CarryLimits", l))
	}
	return byte(i)
}

// carrySpec encodes limits as a policy spec (nil: unlimited).
func carrySpec(limits []keyrate.Limit) []byte {
	if len(limits) > 3 {
		panic("conformance: a CarryModel policy has at most 3 limits")
	}
	spec := []byte{byte(len(limits)), 0, 0, 0}
	for i, l := range limits {
		spec[1+i] = carryIndex(l)
	}
	return spec
}

// NewCarryInput starts an input whose policies are policies: the default
// first (and as the second member's default, unless Alt says otherwise),
// then p1 to p4 (nil, or those left out: unlimited). logs allows
// keyrate.SlidingLog limits (and so leaves atomicbucket out).
func NewCarryInput(logs bool, policies ...[]keyrate.Limit) *CarryInput {
	if len(policies) == 0 || len(policies) > len(carrySlots) || len(policies[0]) == 0 {
		panic("conformance: NewCarryInput needs a limited default and at most 4 more policies")
	}
	in := &CarryInput{b: make([]byte, carryHeader)}
	if logs {
		in.b[0] = 1
	}
	for i, p := range policies {
		copy(in.b[1+4*i:], carrySpec(p))
	}
	copy(in.b[carryHeader-4:], carrySpec(policies[0]))
	return in
}

// Alt sets the second member's default policy.
func (in *CarryInput) Alt(limits ...keyrate.Limit) *CarryInput {
	copy(in.b[carryHeader-4:], carrySpec(limits))
	return in
}

// Member makes the operations that follow go through member m.
func (in *CarryInput) Member(m int) *CarryInput {
	in.member = byte(m)
	return in
}

// carryCostByte encodes cost (0 to 127, or −1).
func carryCostByte(cost int) byte {
	switch {
	case cost == -1:
		return 127
	case cost == 0:
		return 0
	case cost >= 1 && cost <= 6:
		return byte(cost + 5)
	case cost >= 7 && cost <= 127:
		return byte(cost + 128)
	}
	panic(fmt.Sprintf("conformance: a CarryModel cost is −1 to 127, not %d", cost))
}

// op appends an operation.
func (in *CarryInput) op(kind, key, slot, cost int, arg byte) *CarryInput {
	who := byte(key + 3*int(in.member) + 6*slot)
	in.b = append(in.b, byte(kind), who, carryCostByte(cost), arg)
	return in
}

// AllowN is AllowN(key, cost) under the key's policy.
func (in *CarryInput) AllowN(key, cost int) *CarryInput { return in.op(opAllowN, key, 0, cost, 0) }

// AllowTier is AllowTier(key, the tier of slot, cost).
func (in *CarryInput) AllowTier(key, slot, cost int) *CarryInput {
	return in.op(opAllowTier, key, slot, cost, 0)
}

// Peek is Peek(key).
func (in *CarryInput) Peek(key int) *CarryInput { return in.op(opPeek, key, 0, 1, 0) }

// Refund is Refund(key, cost).
func (in *CarryInput) Refund(key, cost int) *CarryInput { return in.op(opRefund, key, 0, cost, 0) }

// RefundTier is RefundTier(key, the tier of slot, cost).
func (in *CarryInput) RefundTier(key, slot, cost int) *CarryInput {
	return in.op(opRefund, key, slot, cost, 1)
}

// carryWait returns maxWait's index in carryWaits, or panics.
func carryWait(maxWait time.Duration) byte {
	i := slices.Index(carryWaits, maxWait)
	if i < 0 {
		panic(fmt.Sprintf("conformance: %v is not one of CarryModel's maximum waits", maxWait))
	}
	return byte(i)
}

// Reserve is Reserve(key, cost, maxWait) under the key's policy.
func (in *CarryInput) Reserve(key, cost int, maxWait time.Duration) *CarryInput {
	return in.op(opReserve, key, 0, cost, carryWait(maxWait))
}

// ReserveTier is ReserveTier(key, the tier of slot, cost, maxWait).
func (in *CarryInput) ReserveTier(key, slot, cost int, maxWait time.Duration) *CarryInput {
	return in.op(opReserve, key, slot, cost, 128|carryWait(maxWait))
}

// Cancel cancels the n-th reservation made (from 0).
func (in *CarryInput) Cancel(n int) *CarryInput { return in.op(opCancel, 0, 0, 1, byte(n)) }

// SetPolicy replaces the policy of slot by limits (none: unlimited).
func (in *CarryInput) SetPolicy(slot int, limits ...keyrate.Limit) *CarryInput {
	in.op(opSetPolicy, 0, slot, 1, 1)
	in.b = append(in.b, carrySpec(limits)...)
	return in
}

// Reorder replaces the policy of slot by its limits in reverse order.
func (in *CarryInput) Reorder(slot int) *CarryInput {
	in.op(opSetPolicy, 0, slot, 1, 0)
	in.b = append(in.b, 0, 0, 0, 0)
	return in
}

// Sweep sweeps every store.
func (in *CarryInput) Sweep() *CarryInput { return in.op(opSweep, 0, 0, 1, 0) }

// Advance moves the clock d on, in as few steps as it takes; d must be a
// whole number of µs.
func (in *CarryInput) Advance(d time.Duration) *CarryInput {
	if d%time.Microsecond != 0 || d < 0 {
		panic(fmt.Sprintf("conformance: CarryModel's clock moves by whole µs forwards, not %v", d))
	}
	for d > 0 {
		best, arg := time.Duration(0), byte(0)
		for a := range 64 {
			if s := carrySteps[a%16] * time.Duration(1+a/16); s <= d && s > best {
				best, arg = s, byte(a)
			}
		}
		in.op(opAdvance, 0, 0, 1, arg)
		d -= best
	}
	return in
}

// Move makes the key's policy that of slot (by WithPolicyFunc).
func (in *CarryInput) Move(key, slot int) *CarryInput {
	return in.op(opMove, key, 0, 1, byte(slot))
}

// Wait is Wait(key, cost), with no time to wait.
func (in *CarryInput) Wait(key, cost int) *CarryInput { return in.op(opWait, key, 0, cost, 0) }

// WaitTier is WaitTier(key, the tier of slot, cost), with no time to wait.
func (in *CarryInput) WaitTier(key, slot, cost int) *CarryInput {
	return in.op(opWait, key, slot, cost, 1)
}

// Bytes returns the input.
func (in *CarryInput) Bytes() []byte { return slices.Clone(in.b) }
