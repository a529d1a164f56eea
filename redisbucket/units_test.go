package redisbucket

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// TestUnitsNeverNegative builds Decisions from every debt the script can
// return (checkReply's range), at its ends and at random, for limits at the
// ends of what compileUnits accepts: no duration may be negative, and no
// Remaining either.
func TestUnitsNeverNegative(t *testing.T) {
	limits := []keyrate.Limit{
		keyrate.PerSecond(1),
		keyrate.PerSecond(1_000_000), // a token every µs
		{Rate: 1, Per: time.Duration(maxFill) * time.Microsecond, Burst: 1}, // the longest fill at k = 1
		{Rate: 1_000_000, Per: time.Duration(maxFill) * time.Microsecond, Burst: 1},
		{Rate: 7, Per: 3 * time.Second, Burst: 5},
		{Rate: 3, Per: 10 * time.Second, Burst: 3},
		{Rate: 1, Per: 1001 * time.Nanosecond, Burst: 3},
		{Rate: 999_983, Per: time.Second, Burst: 40},
	}
	// The largest burst each limit's rate allows, too.
	for _, l := range limits[:] {
		u, err := compileUnits(l.WithBurst(1))
		if err != nil {
			t.Fatalf("compileUnits(%v): %v", l, err)
		}
		limits = append(limits, l.WithBurst(int(maxFill/u.interval)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range limits {
		u, err := compileUnits(l)
		if err != nil {
			t.Fatalf("compileUnits(%v): %v", l, err)
		}
		fillMicros := u.fill / u.k
		var debts []debt
		for _, m := range []int64{0, 1, fillMicros - 1, fillMicros, fillMicros + 1, maxMicros, maxDebtMicros} {
			for _, tk := range []int64{0, u.k - 1} {
				if m >= 0 {
					debts = append(debts, debt{m, tk})
				}
			}
		}
		for range 1000 {
			debts = append(debts, debt{rng.Int64N(maxDebtMicros + 1), rng.Int64N(u.k)})
			debts = append(debts, debt{rng.Int64N(fillMicros + 2), rng.Int64N(u.k)})
		}
		for _, d := range debts {
			if err := u.checkReply([]int64{0, d.micros, d.ticks, 0}); err != nil {
				t.Fatalf("%v: checkReply rejects debt %+v: %v", l, d, err)
			}
			for _, cost := range []int{1, l.Burst} {
				for _, allowed := range []bool{false, true} {
					if dec := u.decide(d, cost, allowed); dec.RetryAfter < 0 || dec.ResetAfter < 0 || dec.Remaining < 0 {
						t.Fatalf("%v: decide(%+v, %d, %v) = %+v", l, d, cost, allowed, dec)
					}
				}
			}
			if dec := u.peek(d); dec.RetryAfter < 0 || dec.ResetAfter < 0 || dec.Remaining < 0 {
				t.Fatalf("%v: peek(%+v) = %+v", l, d, dec)
			}
		}
	}
}

// TestCheckReply rejects every reply outside the script's range.
func TestCheckReply(t *testing.T) {
	u, err := compileUnits(keyrate.Limit{Rate: 7, Per: 3 * time.Second, Burst: 5}) // k > 1
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range [][]int64{
		nil,
		{1, 0, 0},
		{1, 0, 0, 0, 0},
		{2, 0, 0, 0},
		{-1, 0, 0, 0},
		{0, -1, 0, 0},
		{0, maxDebtMicros + 1, 0, 0},
		{0, -1 << 63, 0, 0},
		{0, 0, -1, 0},
		{0, 0, u.k, 0},
		{0, 0, 0, 2},
		{0, 0, 0, -1},
	} {
		if err := u.checkReply(res); err == nil {
			t.Errorf("checkReply(%v) = nil, want an error", res)
		}
	}
}
