package conformance_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestCarryStress is the stress run beside
// TestCarryAtStaleReadingMintsNothing: goroutines spend from one key under
// the slow and the fast tier (slowFast) at random, so that it moves between
// them all the time, each stepping the clock by 20ms every 8; a request
// held up across a step carries the key at a reading older than the
// state it carries. Every admission whose call saw no step of the clock
// (the same reading just before and just after it) was decided at that
// reading, and over every span [a, b] between two of them at most 10 +
// 20·(b − a)/1s are admitted: the burst of either tier and the faster
// rate, which no move between them can pass. The counts are of
// iterations, never of time.
func TestCarryStress(t *testing.T) {
	type admission struct{ before, after time.Duration }
	ops := 3000
	if testing.Short() {
		ops = 600
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			clk := clock.NewManual(time.Hour)
			l, err := st.new(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(slowFast...))
			if err != nil {
				t.Fatal(err)
			}
			ps := l.(keyrate.PolicyLimiter)
			tiers := make([]keyrate.Tier, len(slowFast))
			for i, p := range slowFast {
				tiers[i], _ = ps.Tier(p.Name)
			}
			goroutines := max(4, runtime.GOMAXPROCS(0))
			var (
				mu       sync.Mutex
				admitted []admission
				wg       sync.WaitGroup
			)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					var mine []admission
					for i := range ops {
						if i%8 == 7 { // the clock moves with the spends, however they are scheduled
							clk.Advance(20 * time.Millisecond)
						}
						before := clk.Now()
						d, err := ps.AllowTier("k", tiers[rng.IntN(len(tiers))], 1)
						after := clk.Now()
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mine = append(mine, admission{before, after})
						}
					}
					mu.Lock()
					admitted = append(admitted, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if len(admitted) < ops/10 { // about goroutines·ops/20 are: 20 a second, each goroutine stepping 20ms every 8 calls
				t.Fatalf("only %d admissions: the run exercises too little", len(admitted))
			}
			// The admissions whose call saw no step of the clock were decided
			// at that reading exactly; the others are left out (which can
			// only hide an excess, never invent one).
			var at []time.Duration
			for _, a := range admitted {
				if a.before == a.after {
					at = append(at, a.before)
				}
			}
			slices.Sort(at)
			for i := range at {
				for j := i; j < len(at); j++ {
					n, span := j-i+1, at[j]-at[i]
					if limit := 10 + 20*span.Seconds(); float64(n) > limit+1e-9 {
						t.Fatalf("%d admitted within [%v, %v] (%v), above 10 + 20/s·%v = %.2f", n, at[i], at[j], span, span, limit)
					}
				}
			}
		})
	}
}
