package redisbucket

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// TestRepliesNeverNegative builds Decisions from every debt the script can
// return (read's range), at its ends and at random, for limits at the ends
// of what compileUnits accepts: no duration may be negative, and no
// Remaining either.
func TestRepliesNeverNegative(t *testing.T) {
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
		p := keyrate.Policy{Name: "p", Limits: []keyrate.Limit{l}}
		pl, err := newPlan(p)
		if err != nil {
			t.Fatalf("newPlan(%v): %v", p, err)
		}
		rs, err := rules.NewRules(p, clock.NewManual(0))
		if err != nil {
			t.Fatal(err)
		}
		u := pl.units[0]
		fillMicros := u.fill / u.k
		var replies [][]int64
		for _, m := range []int64{0, 1, fillMicros - 1, fillMicros, fillMicros + 1, maxMicros, maxDebtMicros} {
			for _, tk := range []int64{0, u.k - 1} {
				for _, r := range []int64{0, int64(u.g) - 1} {
					if m >= 0 && (m > 0 || tk > 0 || r == 0) {
						replies = append(replies, []int64{-1, 0, m, tk, r})
					}
				}
			}
		}
		for range 1000 {
			replies = append(replies, []int64{-1, 0, rng.Int64N(maxDebtMicros) + 1, rng.Int64N(u.k), rng.Int64N(int64(u.g))})
			replies = append(replies, []int64{-1, 0, rng.Int64N(fillMicros+2) + 1, rng.Int64N(u.k), rng.Int64N(int64(u.g))})
		}
		var st [1]rules.State
		for _, res := range replies {
			if _, _, _, err := pl.read(res, st[:], 0); err != nil {
				t.Fatalf("%v: read rejects %v: %v", l, res, err)
			}
			for _, cost := range []int{1, l.Burst} {
				for _, denied := range []int{-1, 0} {
					if d := rs.Decide(st[:], 0, cost, denied); d.RetryAfter < 0 || d.ResetAfter < 0 || d.WindowResetAfter < 0 || d.Remaining < 0 {
						t.Fatalf("%v: Decide(%v, %d, %d) = %+v", l, res, cost, denied, d)
					}
				}
			}
			if d := rs.Peek(st[:], 0); d.RetryAfter < 0 || d.ResetAfter < 0 || d.Remaining < 0 {
				t.Fatalf("%v: Peek(%v) = %+v", l, res, d)
			}
		}
	}
}

// TestReadRejects rejects every reply outside the script's range.
func TestReadRejects(t *testing.T) {
	pl, err := newPlan(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{{Rate: 7, Per: 3 * time.Second, Burst: 5}, keyrate.PerHour(3)}}) // k > 1
	if err != nil {
		t.Fatal(err)
	}
	k, g := pl.units[0].k, int64(pl.units[0].g)
	for _, res := range [][]int64{
		nil,
		{-1, 0, 0, 0, 0},
		{-1, 0, 0, 0, 0, 0, 0, 0, 0},
		{2, 0, 0, 0, 0, 0, 0, 0},
		{-2, 0, 0, 0, 0, 0, 0, 0},
		{-1, 2, 0, 0, 0, 0, 0, 0},
		{-1, -1, 0, 0, 0, 0, 0, 0},
		{-1, 0, -1, 0, 0, 0, 0, 0},
		{-1, 0, maxDebtMicros + 1, 0, 0, 0, 0, 0},
		{-1, 0, -1 << 63, 0, 0, 0, 0, 0},
		{-1, 0, 0, -1, 0, 0, 0, 0},
		{-1, 0, 0, k, 0, 0, 0, 0},
		{-1, 0, 1, 0, -1, 0, 0, 0},
		{-1, 0, 1, 0, g, 0, 0, 0},
		{-1, 0, 0, 0, 1, 0, 0, 0}, // a full window less a tick
		{-1, 0, 0, 0, 0, 0, 0, int64(pl.units[1].g)},
	} {
		var st [2]rules.State
		if _, _, _, err := pl.read(res, st[:], 0); err == nil {
			t.Errorf("read(%v) = nil, want an error", res)
		}
	}
}
