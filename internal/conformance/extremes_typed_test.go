package conformance_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestExtremesTypedAndNonNegative drives every store, under limits at the
// extremes (one token per 100 years, one per nanosecond with a burst of
// 2^40, a million a second with a burst of 1, windows of ten years), alone
// and beside a second window, with costs of 1, 2, 0, -1, MinInt and MaxInt
// and maximum waits of 0, ±1ns, MinInt64, MaxInt64 and 50 years, on
// clocks started at 0 and at ±2^62 ns and read at the epoch, an hour
// before it, 100, 146 and 200 years after it and at both ends of
// time.Duration, through AllowTier, ReserveTier and two Cancels, RefundTier,
// Peek, WaitTier and Sweep: every error is typed, no duration is negative,
// no reservation waits longer than allowed, and no reservation is
// cancelled twice.
func TestExtremesTypedAndNonNegative(t *testing.T) {
	year := 365 * 24 * time.Hour
	limits := []keyrate.Limit{
		{Rate: 1, Per: 100 * year, Burst: 1},
		{Rate: 1, Per: 100 * year, Burst: 2},
		{Rate: 1, Per: time.Nanosecond, Burst: 1},
		{Rate: 1, Per: time.Nanosecond, Burst: 1 << 40},
		{Rate: 3, Per: 10 * time.Second, Burst: 3},
		{Rate: 1000000, Per: time.Second, Burst: 1},
		{Rate: 7, Per: 5 * time.Millisecond, Burst: 7},
		keyrate.Limit{Rate: 1, Per: 10 * year}.Using(keyrate.FixedWindow),
		keyrate.Limit{Rate: 5, Per: 10 * year}.Using(keyrate.SlidingWindow),
	}
	readings := []time.Duration{0, -time.Hour, math.MinInt64, math.MaxInt64, 100 * year, 146 * year, 200 * year, 1}
	costs := []int{1, 2, 0, -1, math.MinInt, math.MaxInt}
	waits := []time.Duration{0, 1, -1, math.MinInt64, math.MaxInt64, 50 * year, time.Second}
	for _, st := range stores {
		for _, lim := range limits {
			if err := lim.Validate(); err != nil {
				continue // 1 per 100 years with a burst of 2 fills past the clock range
			}
			for _, start := range []time.Duration{0, math.MinInt64 / 2, math.MaxInt64 / 2} {
				clk := clock.NewManual(start)
				l, err := st.new(lim, keyrate.WithClock(clk), keyrate.WithPolicies(keyrate.Policy{Name: "two", Limits: []keyrate.Limit{lim, keyrate.PerSecond(3)}}))
				if err != nil {
					t.Fatalf("%s %v: %v", st.name, lim, err)
				}
				w := l.(keyrate.WaitLimiter)
				two, _ := w.Tier("two")
				chk := func(what string, d keyrate.Decision) {
					if d.RetryAfter < 0 || d.ResetAfter < 0 || d.WindowResetAfter < 0 || d.Remaining < 0 {
						t.Errorf("%s %v start %v: %s: negative: %+v", st.name, lim, start, what, d)
					}
				}
				for _, rd := range readings {
					clk.Set(rd)
					for _, c := range costs {
						for _, tier := range []keyrate.Tier{{}, two} {
							d, err := w.AllowTier("k", tier, c)
							if err != nil && !errors.Is(err, keyrate.ErrInvalidCost) && !errors.Is(err, keyrate.ErrCostExceedsBurst) {
								t.Errorf("%s %v: AllowTier(%d) at %v: untyped %v", st.name, lim, c, rd, err)
							}
							chk("AllowTier", d)
							for _, wt := range waits {
								r, err := w.ReserveTier("k", tier, c, wt)
								if err != nil {
									continue
								}
								if r.Delay() < 0 || (r.OK() && r.Delay() > max(wt, 0)) {
									t.Errorf("%s %v: Reserve(%d, %v) at %v: OK %v delay %v", st.name, lim, c, wt, rd, r.OK(), r.Delay())
								}
								if r.DelayFrom(math.MinInt64) < 0 || r.DelayFrom(math.MaxInt64) < 0 {
									t.Errorf("%s %v: Reserve(%d, %v) at %v: a negative DelayFrom", st.name, lim, c, wt, rd)
								}
								if r.Cancel() && r.Cancel() {
									t.Errorf("%s %v: Reserve(%d, %v) at %v cancelled twice", st.name, lim, c, wt, rd)
								}
							}
							if err := w.RefundTier("k", tier, c); err != nil && !errors.Is(err, keyrate.ErrInvalidCost) && !errors.Is(err, keyrate.ErrCostExceedsBurst) {
								t.Errorf("%s %v: RefundTier(%d) at %v: untyped %v", st.name, lim, c, rd, err)
							}
							chk("Peek", w.Peek("k"))
							// A wait the manual clock would never end is cut
							// short by a deadline a millisecond of real time
							// away: the result is nil or a typed error.
							ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
							err = w.WaitTier(ctx, "k", tier, c)
							cancel()
							if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, keyrate.ErrInvalidCost) && !errors.Is(err, keyrate.ErrCostExceedsBurst) {
								t.Errorf("%s %v: WaitTier(%d) at %v: untyped %v", st.name, lim, c, rd, err)
							}
						}
					}
					l.(keyrate.BoundedLimiter).Sweep()
				}
			}
		}
	}
}
