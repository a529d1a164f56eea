package conformance_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestLogRefundsUnderMaxKeys drives the stores that carry keyrate.SlidingLog
// with refunds, sweeps, a full store (WithMaxKeys, eviction grace 0) and a
// clock that only moves forwards, and checks every decision, Remaining,
// RetryAfter and ResetAfter included, against LogModel: a key the store
// refused (ErrStoreFull) is left as it was, and an evicted key, being
// full, is as a new one.
func TestLogRefundsUnderMaxKeys(t *testing.T) {
	const w = time.Second
	for _, n := range []int{1, 3, 7} {
		limit := keyrate.Limit{Rate: n, Per: w}.Using(keyrate.SlidingLog)
		for _, s := range stores[:2] {
			for seed := range uint64(20) {
				t.Run(fmt.Sprintf("store=%s/n=%d/seed=%d", s.name, n, seed), func(t *testing.T) {
					clk := clock.NewManual(time.Hour)
					l, err := s.new(limit, keyrate.WithClock(clk), keyrate.WithMaxKeys(2), keyrate.WithEvictionGrace(0))
					if err != nil {
						t.Fatal(err)
					}
					defer l.(keyrate.BoundedLimiter).Close()
					pl := l.(keyrate.PolicyLimiter)
					rng := rand.New(rand.NewPCG(seed, uint64(n)))
					models := map[string]*conformance.LogModel{}
					for i := range 300 {
						clk.Advance(time.Duration(rng.Int64N(int64(w / 3))))
						tick := int64(clk.Now() - time.Hour)
						key := fmt.Sprint("k", rng.IntN(4))
						m := models[key]
						if m == nil {
							m = conformance.NewLogModel(limit)
						}
						switch op := rng.IntN(10); {
						case op == 0:
							l.(keyrate.BoundedLimiter).Sweep()
						case op <= 2:
							c := 1 + rng.IntN(n)
							if err := pl.Refund(key, c); err != nil {
								t.Fatalf("op %d: Refund(%s, %d): %v", i, key, c, err)
							}
							if models[key] != nil {
								m.Refund(tick, int64(c))
							}
						default:
							c := 1 + rng.IntN(n)
							got, err := l.AllowN(key, c)
							if errors.Is(err, keyrate.ErrStoreFull) {
								continue
							}
							if err != nil {
								t.Fatalf("op %d: AllowN(%s, %d): %v", i, key, c, err)
							}
							want := m.Decide(tick, int64(c), m.Take(tick, int64(c)))
							want.Policy, want.Limit = keyrate.DefaultPolicy, limit
							models[key] = m
							if got != want {
								t.Fatalf("op %d: AllowN(%s, %d) at tick %d = %+v; model %+v", i, key, c, tick, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestPolicyShrinkRestore: keyrate.PolicyLimiter promises that "no
// sequence of changes or tier moves hands a key tokens it has not
// refilled". At one instant (a frozen clock), a key that spent its 5 per
// hour, moved to 3 per hour and back to 5 per hour, must get nothing more:
// what it spent is carried whole, not capped at the smaller limit and
// forgotten.
func TestPolicyShrinkRestore(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog} {
		for _, s := range stores {
			t.Run(fmt.Sprintf("alg=%v/store=%s", alg, s.name), func(t *testing.T) {
				big, small := keyrate.PerHour(5).Using(alg), keyrate.PerHour(3).Using(alg)
				l, err := s.new(big, keyrate.WithClock(clock.NewManual(time.Hour)))
				if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer l.(keyrate.BoundedLimiter).Close()
				pl := l.(keyrate.PolicyLimiter)
				admitted := 0
				for _, lim := range []keyrate.Limit{big, small, big} {
					if err := pl.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{lim}}); err != nil {
						t.Fatal(err)
					}
					for range 6 {
						if l.Allow("k") {
							admitted++
						}
					}
				}
				if admitted != 5 {
					t.Errorf("admitted %d at one instant under 5 → 3 → 5 per hour, want 5", admitted)
				}
			})
		}
	}
}

// TestPolicyShrinkRestoreOverTime moves a key between 5 and 3 per second
// (one algorithm, one window length) at random readings and checks that
// no aligned window (FixedWindow, SlidingWindow) or no interval of length
// W (SlidingLog) admits more than 5, and no token bucket more than
// Burst + Rate·T/Per.
func TestPolicyShrinkRestoreOverTime(t *testing.T) {
	const w = time.Second
	for _, alg := range []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog} {
		for _, s := range stores {
			for seed := range uint64(10) {
				t.Run(fmt.Sprintf("alg=%v/store=%s/seed=%d", alg, s.name, seed), func(t *testing.T) {
					big, small := keyrate.PerSecond(5).Using(alg), keyrate.PerSecond(3).Using(alg)
					clk := clock.NewManual(time.Hour)
					l, err := s.new(big, keyrate.WithClock(clk))
					if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
						t.Skip(err)
					}
					if err != nil {
						t.Fatal(err)
					}
					defer l.(keyrate.BoundedLimiter).Close()
					pl := l.(keyrate.PolicyLimiter)
					rng := rand.New(rand.NewPCG(seed, 99))
					var at []time.Duration
					for range 400 {
						clk.Advance(time.Duration(rng.Int64N(int64(w / 7))))
						if rng.IntN(5) == 0 {
							lim := big
							if rng.IntN(2) == 0 {
								lim = small
							}
							if err := pl.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{lim}}); err != nil {
								t.Fatal(err)
							}
						}
						c := 1 + rng.IntN(3)
						if d, err := l.AllowN("k", c); err == nil && d.Allowed {
							for range c {
								at = append(at, clk.Now()-time.Hour)
							}
						}
					}
					for i := range at {
						lo, hi := at[i], at[i]+w // any interval of length W
						if alg.Windowed() {
							lo = at[i] / w * w
							hi = lo + w
						}
						n := 0
						for _, a := range at {
							if a >= lo && a < hi {
								n++
							}
						}
						bound := 5
						if alg == keyrate.TokenBucket {
							bound = 10 // Burst + Rate·W/Per
						}
						if n > bound {
							t.Fatalf("%d admitted in [%v, %v), above %d", n, lo, hi, bound)
						}
					}
				})
			}
		}
	}
}

// TestLogConcurrentPolicyChanges: goroutines spend on one key of a log
// while another changes its policy between 5 and 3 per hour (a new Rules
// at every change, so every spend may carry), all at one frozen instant:
// at most 5 are admitted.
func TestLogConcurrentPolicyChanges(t *testing.T) {
	for _, s := range stores[:2] {
		t.Run("store="+s.name, func(t *testing.T) {
			big, small := keyrate.PerHour(5).Using(keyrate.SlidingLog), keyrate.PerHour(3).Using(keyrate.SlidingLog)
			for round := range 20 {
				l, err := s.new(big, keyrate.WithClock(clock.NewManual(time.Hour)))
				if err != nil {
					t.Fatal(err)
				}
				pl := l.(keyrate.PolicyLimiter)
				var admitted atomic.Int64
				var done atomic.Bool
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := 0; i < 10 || !done.Load(); i++ { // until the changes end, and then some
							if l.Allow("k") {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer done.Store(true)
					<-start
					for i := range 200 {
						lim := big
						if i%2 == 0 {
							lim = small
						}
						if err := pl.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{lim}}); err != nil {
							t.Error(err)
							return
						}
					}
				}()
				close(start)
				wg.Wait()
				l.(keyrate.BoundedLimiter).Close()
				if n := admitted.Load(); n > 5 {
					t.Fatalf("round %d: %d admitted at one instant under a log of 5 (and 3) per hour", round, n)
				}
			}
		})
	}
}

// TestLogCarriesReservedDebt: a token bucket that has reserved past its
// burst (5 now and 5 at 1h under 5 per hour), moved to a log and back at
// one instant, still owes all 10: nothing more is admitted in the hour,
// which already holds Burst + Rate·T/Per = 10.
func TestLogCarriesReservedDebt(t *testing.T) {
	for _, s := range stores[:2] {
		t.Run("store="+s.name, func(t *testing.T) {
			clk := clock.NewManual(time.Hour)
			tb, lg := keyrate.PerHour(5), keyrate.PerHour(5).Using(keyrate.SlidingLog)
			l, err := s.new(tb, keyrate.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			defer l.(keyrate.BoundedLimiter).Close()
			pl, w := l.(keyrate.PolicyLimiter), l.(keyrate.WaitLimiter)
			for i, want := range []time.Duration{0, time.Hour} {
				if r, err := w.Reserve("k", 5, 2*time.Hour); err != nil || !r.OK() || r.Delay() != want {
					t.Fatalf("Reserve %d: OK %v, Delay %v, %v; want a slot %v away", i, r.OK(), r.Delay(), err, want)
				}
			}
			for _, lim := range []keyrate.Limit{lg, tb} {
				if err := pl.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{lim}}); err != nil {
					t.Fatal(err)
				}
				if l.Allow("k") { // carries the key into lim
					t.Fatalf("under %v, at once: allowed after 10 reserved", lim)
				}
			}
			for m := range 60 {
				clk.Advance(time.Minute)
				if l.Allow("k") {
					t.Fatalf("allowed %dm after reserving 5 now and 5 at 1h under %v, through a log: above Burst + Rate·T/Per", m+1, tb)
				}
			}
		})
	}
}
