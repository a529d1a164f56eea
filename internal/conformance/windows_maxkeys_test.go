package conformance_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// Under WithMaxKeys pressure (and routine eviction with grace 0), every
// decision a full store makes equals the never-evicting model's.
func TestWindowMaxKeysWindows(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for si, st := range stores {
			t.Run(fmt.Sprint(alg, "/", st.name), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(si), 5))
				for round := range 30 {
					limit := keyrate.Limit{Rate: 1 + rng.IntN(6), Per: time.Duration(1+rng.IntN(50)) * time.Microsecond}.Using(alg)
					clk := clock.NewManual(0)
					opts := []keyrate.Option{keyrate.WithClock(clk), keyrate.WithMaxKeys(1 + rng.IntN(4)), keyrate.WithEvictionGrace(time.Duration(rng.IntN(3)) * limit.Per)}
					if rng.IntN(2) == 0 {
						opts = append(opts, keyrate.WithHashedKeys())
					}
					l0, err := st.new(limit, opts...)
					if err != nil {
						t.Fatal(err)
					}
					l := l0.(keyrate.WaitLimiter)
					models := map[string]*conformance.WindowModel{}
					now := int64(0)
					for step := range 400 {
						now += rng.Int64N(int64(limit.Per) / 2)
						clk.Set(time.Duration(now))
						k := fmt.Sprint("k", rng.IntN(8))
						m := models[k]
						if m == nil {
							m = conformance.NewWindowModel(limit)
							models[k] = m
						}
						cost := 1 + rng.IntN(limit.Rate)
						if rng.IntN(5) == 0 {
							wait := time.Duration(rng.Int64N(2 * int64(limit.Per)))
							r, err := l.Reserve(k, cost, wait)
							if errors.Is(err, keyrate.ErrStoreFull) {
								continue
							}
							slot, ok := m.Reserve(now, int64(cost), int64(wait))
							if r.OK() != ok || r.Delay() != time.Duration(slot-now) {
								t.Fatalf("round %d step %d %v: Reserve(%s,%d,%v) = %v %v, model %v %v", round, step, limit, k, cost, wait, r.OK(), r.Delay(), ok, slot-now)
							}
							continue
						}
						got, err := l.AllowN(k, cost)
						if errors.Is(err, keyrate.ErrStoreFull) {
							continue
						}
						ok := m.Take(now, int64(cost))
						want := modelDecide(m, now, int64(cost), ok)
						want.Policy, want.Limit = keyrate.DefaultPolicy, limit
						if got != want {
							t.Fatalf("round %d step %d %v t=%d: AllowN(%s,%d) = %+v\nmodel %+v", round, step, limit, now, k, cost, got, want)
						}
					}
					l0.(keyrate.BoundedLimiter).Close()
				}
			})
		}
	}
}
