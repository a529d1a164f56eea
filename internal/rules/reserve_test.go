package rules_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// reserveCase is a random policy of one to three windows, with states a
// random number of tokens in debt (past Burst too, as a reservation
// leaves them), compiled on a manual clock at epoch 0.
func reserveCase(rng *rand.Rand) (*rules.Rules, []rules.State, *clock.Manual) {
	clk := clock.NewManual(0)
	n := 1 + rng.IntN(3)
	p := keyrate.Policy{Name: "p"}
	for range n {
		l := keyrate.Limit{Rate: 1 + rng.IntN(20), Per: time.Duration(1+rng.IntN(5000)) * time.Millisecond, Burst: 1 + rng.IntN(10)}
		if rng.IntN(4) == 0 { // not exact: a token interval that is no whole number of ns
			l = keyrate.Limit{Rate: 7, Per: time.Duration(1000+rng.IntN(1000)) * time.Microsecond, Burst: 1 + rng.IntN(10)}
		}
		p.Limits = append(p.Limits, l)
	}
	rs, err := rules.NewRules(p, clk)
	if err != nil {
		panic(err)
	}
	clk.Set(time.Duration(rng.IntN(10_000)) * time.Millisecond)
	s := make([]rules.State, n)
	for i := range s {
		r := rs.Rule(i)
		debt := uint64(rng.IntN(3*r.Limit().Burst)) * uint64(r.Limit().Per) * r.Scale() / uint64(r.Limit().Rate)
		s[i] = rules.State(r.Ticks(clk.Now()) + debt)
	}
	return rs, s, clk
}

// TestRulesReserveIsEarliestSlot checks Rules.Reserve against its
// definition on random policies and states: the slot is the earliest
// whole-nanosecond reading at or after t at which Take allows the cost
// (one nanosecond earlier it denies); a reservation within the wait leaves
// exactly the states Take leaves at the slot (for one window, the states
// Rule.Reserve leaves at t); one past the wait changes nothing; with a
// wait of 0 it is Take; Slot recovers the slot from the states; and Cancel
// at t gives back exactly what it spent, so that the same reservation
// made again gets the same slot.
func TestRulesReserveIsEarliestSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 20_000 {
		rs, s, clk := reserveCase(rng)
		now := clk.Now()
		cost := 1 + rng.IntN(10)
		if rs.CheckCost(cost) != nil {
			continue
		}
		wait := time.Duration(rng.IntN(20_000)) * time.Millisecond
		desc := fmt.Sprintf("case %d: %v at %v, states %v, cost %d, wait %v", iter, rs.Policy().Limits, now, s, cost, wait)

		// The earliest slot, by Take.
		takes := func(at time.Duration) bool {
			c := append([]rules.State(nil), s...)
			return rs.Take(c, at, cost) < 0
		}
		got := append([]rules.State(nil), s...)
		slot, denied := rs.Reserve(got, now, cost, wait)
		if !takes(slot) || slot > now && takes(slot-1) {
			t.Fatalf("%s: Reserve's slot %v is not the earliest at which Take allows the cost (Take there %v, 1ns before %v)", desc, slot, takes(slot), takes(slot-1))
		}
		if slot < now {
			t.Fatalf("%s: slot %v before the reading", desc, slot)
		}
		if (denied < 0) != (slot-now <= wait) {
			t.Fatalf("%s: Reserve denied %d with the slot %v after the reading", desc, denied, slot-now)
		}
		if denied >= 0 {
			if fmt.Sprint(got) != fmt.Sprint(s) {
				t.Fatalf("%s: a denied reservation changed the states to %v", desc, got)
			}
			continue
		}
		want := append([]rules.State(nil), s...)
		if rs.Len() == 1 {
			r := rs.Rule(0)
			next, ok := r.Reserve(s[0], r.Ticks(now), cost, r.WaitTicks(wait))
			if !ok || got[0] != next {
				t.Fatalf("%s: one window's state %v, Rule.Reserve's %v (%v)", desc, got[0], next, ok)
			}
		} else {
			rs.Take(want, slot, cost)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: states %v after the reservation, Take at the slot %v leaves %v", desc, got, slot, want)
			}
		}
		if at := rs.Slot(got, now); at != slot {
			t.Fatalf("%s: Slot recovers %v from the states, Reserve said %v", desc, at, slot)
		}
		if wait == 0 || slot == now {
			c := append([]rules.State(nil), s...)
			if rs.Take(c, now, cost) >= 0 || fmt.Sprint(c) != fmt.Sprint(got) {
				t.Fatalf("%s: an immediate reservation left %v, Take leaves %v", desc, got, c)
			}
		}
		if slot == now {
			if rs.Cancel(got, rs.End(got), now, slot, cost) {
				t.Fatalf("%s: Cancel of an immediate reservation gave tokens back", desc)
			}
			continue
		}
		end := rs.End(got)
		if !rs.Cancel(got, end, now, slot, cost) {
			t.Fatalf("%s: Cancel of the latest reservation before its slot gave nothing back", desc)
		}
		if rs.Cancel(got, end, now, slot, cost) {
			t.Fatalf("%s: a second Cancel gave tokens back", desc)
		}
		again, _ := rs.Reserve(got, now, cost, wait)
		if again != slot {
			t.Fatalf("%s: after Cancel, the same reservation gets %v, not %v", desc, again, slot)
		}
	}
}

// TestRuleRefundWhilePending: a refund gives nothing back while the
// bucket owes more than Burst (its tokens are promised to reservations),
// and is exact otherwise.
func TestRuleRefundWhilePending(t *testing.T) {
	clk := clock.NewManual(0)
	r, err := rules.NewRule(keyrate.Limit{Rate: 1, Per: time.Second, Burst: 2}, clk)
	if err != nil {
		t.Fatal(err)
	}
	sec := r.Ticks(time.Second)
	s, _ := r.Take(0, 0, 2)                               // empty: owes 2s
	s, ok := r.Reserve(s, 0, 1, r.WaitTicks(time.Second)) // a slot at 1s: owes 3s
	if !ok || !r.Waits(s, 0) || uint64(s) != 3*sec {
		t.Fatalf("reservation: state %d, ok %v, waits %v; want 3s, true, true", s, ok, r.Waits(s, 0))
	}
	if got := r.Refund(s, 0, 1); got != s {
		t.Fatalf("Refund while a reservation's slot is ahead moved the state %d -> %d", s, got)
	}
	if got := r.Refund(s, sec, 1); got != s-rules.State(sec) {
		t.Fatalf("Refund at the slot = %d, want %d (exact once nothing is pending)", got, s-rules.State(sec))
	}
}
