package conformance_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestCarryFrozenStress is the stress run beside TestCarryDebt: on a
// frozen clock, goroutines released together spend from one key under
// every tier in turn, moving it between a token bucket of burst 8, two
// window algorithms and a policy of two windows, while another replaces
// one of the policies by SetPolicy back and forth. No window refills at
// one instant, so at most the largest burst, 8, may be admitted however
// the moves interleave (a window algorithm's N, 3 to 6, counts at one
// instant as a burst). Before the carry owed every window a window state
// counts ahead, 26 to 30 were admitted, every run, in every store.
func TestCarryFrozenStress(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	win := keyrate.Policy{Name: "win", Limits: []keyrate.Limit{keyrate.PerSecond(3).Using(keyrate.SlidingWindow)}}
	win2 := keyrate.Policy{Name: "win", Limits: []keyrate.Limit{keyrate.PerSecond(6).Using(keyrate.FixedWindow)}}
	policies := []keyrate.Policy{
		win,
		{Name: "fixed", Limits: []keyrate.Limit{keyrate.PerMinute(5).Using(keyrate.FixedWindow)}},
		{Name: "two", Limits: []keyrate.Limit{keyrate.PerSecond(4), keyrate.PerHour(6)}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for round := range rounds {
				clk := clock.NewManual(time.Hour)
				l, err := st.new(keyrate.PerHour(8), keyrate.WithClock(clk), keyrate.WithPolicies(policies...))
				if err != nil {
					t.Fatal(err)
				}
				pl := l.(keyrate.PolicyLimiter)
				tiers := []keyrate.Tier{{}}
				for _, p := range policies {
					tier, _ := pl.Tier(p.Name)
					tiers = append(tiers, tier)
				}
				var (
					admitted atomic.Int64
					start    = make(chan struct{})
					wg       sync.WaitGroup
				)
				for g := range max(4, runtime.GOMAXPROCS(0)) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := range 200 {
							if d, err := pl.AllowTier("k", tiers[(g+i)%len(tiers)], 1); err == nil && d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := range 100 {
						p := win
						if i%2 == 0 {
							p = win2
						}
						if err := pl.SetPolicy(p); err != nil {
							t.Error(err)
							return
						}
						runtime.Gosched()
					}
				}()
				close(start)
				wg.Wait()
				l.(keyrate.BoundedLimiter).Close()
				if n := admitted.Load(); n > 8 {
					t.Fatalf("round %d: %d admitted at one instant by a key moved between tiers while a policy changed; the largest burst is 8", round, n)
				}
			}
		})
	}
}
