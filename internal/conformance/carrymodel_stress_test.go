package conformance_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestCarryMovesAtOneInstant is FuzzCarryModel's concurrent companion:
// goroutines released together on a frozen clock spend from one key
// under tiers of every kind (an hour's bucket, sliding and fixed windows
// of a second, a second's bucket with and without the hour beside it),
// so that the key moves between them on almost every call, while one of
// them keeps reversing the windows of the two-window tier with SetPolicy.
// Whatever the interleaving, a carry never mints (docs/design/carry.md):
// at one instant the key is admitted at most the largest Burst of any of
// their windows, 100 (a window algorithm's 2N is 6). Carries that read a
// window's debt as its current count, or matched windows by position,
// admitted about twice that.
func TestCarryMovesAtOneInstant(t *testing.T) {
	sliding := keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingWindow)
	fixed := keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.FixedWindow)
	two := keyrate.Policy{Name: "two", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(100)}}
	policies := []keyrate.Policy{
		two,
		{Name: "one", Limits: []keyrate.Limit{keyrate.PerSecond(10)}},
		{Name: "sliding", Limits: []keyrate.Limit{sliding}},
		{Name: "fixed", Limits: []keyrate.Limit{fixed}},
	}
	const bound = 100
	ops := 2000
	if testing.Short() {
		ops = 400
	}
	for _, st := range stores {
		t.Run("store="+st.name, func(t *testing.T) {
			clk := clock.NewManual(time.Hour)
			l, err := st.new(keyrate.PerHour(100), keyrate.WithClock(clk), keyrate.WithPolicies(policies...))
			if err != nil {
				t.Fatal(err)
			}
			defer l.(keyrate.BoundedLimiter).Close()
			ps := l.(keyrate.PolicyLimiter)
			var tiers []keyrate.Tier
			for _, name := range []string{keyrate.DefaultPolicy, "two", "one", "sliding", "fixed"} {
				tier, err := ps.Tier(name)
				if err != nil {
					t.Fatal(err)
				}
				tiers = append(tiers, tier)
			}
			var (
				admitted atomic.Int64
				start    = make(chan struct{})
				wg       sync.WaitGroup
			)
			goroutines := max(4, runtime.GOMAXPROCS(0))
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 11))
					flipped := two
					<-start
					for i := range ops {
						if g == 0 && i%16 == 15 {
							flipped.Limits = slices.Clone(flipped.Limits)
							slices.Reverse(flipped.Limits)
							if err := ps.SetPolicy(flipped); err != nil {
								t.Error(err)
								return
							}
						}
						cost := 1 + rng.IntN(3)
						d, err := ps.AllowTier("k", tiers[rng.IntN(len(tiers))], cost)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(int64(cost))
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			if n := admitted.Load(); n > bound {
				t.Errorf("%d admitted at one instant by %d goroutines moving one key among tiers, above the largest Burst of their windows, %d", n, goroutines, bound)
			} else if n < 10 {
				t.Fatalf("only %d admitted: the run exercises too little", n)
			}
		})
	}
}
