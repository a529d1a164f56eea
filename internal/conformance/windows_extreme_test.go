package conformance_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
)

// remainingBS is WindowModel.Remaining by binary search (the model's is
// O(N), too slow for N near 2^40).
func remainingBS(m *conformance.WindowModel, t int64) int64 {
	lo, hi := int64(0), m.N // largest k in [0,N] with Allows(t,k) (k=0 always)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if m.Allows(t, mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func modelDecide(m *conformance.WindowModel, t, c int64, allowed bool) keyrate.Decision {
	d := keyrate.Decision{Allowed: allowed, Remaining: int(remainingBS(m, t))}
	d.ResetAfter = time.Duration(max(0, m.ResetAt()-t))
	d.WindowResetAfter = d.ResetAfter
	if !allowed {
		d.RetryAfter = time.Duration(m.Earliest(t, c) - t)
	}
	return d
}

// extremeLimit returns a window limit near the compile bounds: the largest
// N for a random W (found by Validate), or a random one.
func extremeLimit(rng *rand.Rand, alg keyrate.Algorithm) keyrate.Limit {
	var w int64
	switch rng.IntN(6) {
	case 0:
		w = 1 + rng.Int64N(16)
	case 1:
		w = 1 << 60
	case 2:
		w = 1<<60 - rng.Int64N(1000)
	case 3:
		w = rng.Int64N(1<<60) + 1
	case 4:
		w = 1 + rng.Int64N(1e6)
	default:
		w = 1 << (rng.IntN(60) + 1)
		w += rng.Int64N(3) - 1
		w = min(w, 1<<60)
	}
	mk := func(n int64) keyrate.Limit { return keyrate.Limit{Rate: int(n), Per: time.Duration(w)}.Using(alg) }
	// largest valid N by binary search
	lo, hi := int64(1), int64(1)<<62
	if mk(1).Validate() != nil {
		panic(fmt.Sprint("W invalid even for N=1: ", w))
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if mk(mid).Validate() == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	switch rng.IntN(3) {
	case 0:
		return mk(lo)
	case 1:
		return mk(max(1, lo-rng.Int64N(3)))
	}
	return mk(1 + rng.Int64N(min(lo, 50)))
}

func TestWindowExtremeDifferential(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for si, st := range stores {
			t.Run(alg.String()+"/"+st.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(alg)*7+uint64(si), windowSeed))
				for round := range windowRounds {
					limit := extremeLimit(rng, alg)
					clk := clock.NewManual(0)
					opts := []keyrate.Option{keyrate.WithClock(clk), keyrate.WithEvictionGrace(1 << 62)} // routine maintenance off: only explicit sweeps, below which the clock never steps back
					if rng.IntN(2) == 0 {
						opts = append(opts, keyrate.WithHashedKeys())
					}
					l0, err := st.new(limit, opts...)
					if err != nil {
						t.Fatalf("New(%v): %v", limit, err)
					}
					l := l0.(keyrate.WaitLimiter)
					bl := l0.(keyrate.BoundedLimiter)
					r, _ := rules.NewRule(limit, clk)
					rng64 := int64(r.Range())
					W, N := int64(limit.Per), int64(limit.Rate)
					models := map[string]*conformance.WindowModel{}
					keys := []string{"a", "b"}
					for _, k := range keys {
						models[k] = conformance.NewWindowModel(limit)
					}
					// start somewhere: 0, near the range end, or random
					var now int64
					switch rng.IntN(3) {
					case 0:
						now = max(0, rng64-3*W-rng.Int64N(4))
					case 1:
						now = rng.Int64N(rng64)
					}
					floorSafe := int64(0) // never step back below the latest sweep
					// hi is, per key, the latest window the store's state has
					// moved to (a known limitation: a window index never moves
					// back, even when refunds leave it counting nothing, so a
					// reading from an earlier window is denied where the model
					// allows it). Below it, the store must deny and not refund.
					hi := map[string]int64{}
					var trail []string
					for step := range 120 {
						// move the clock: boundaries, back, forward, range end
						switch rng.IntN(8) {
						case 0:
							now = (now/W+1)*W - 1
						case 1:
							now = (now/W + 1) * W
						case 2:
							now = (now/W+1)*W + 1
						case 3:
							now = max(floorSafe, now-rng.Int64N(2*W+1)) // backwards
						case 4:
							now += rng.Int64N(W + 1)
						case 5:
							now = rng64 - rng.Int64N(W+1)
						}
						now = max(min(max(now, 0), rng64), floorSafe)
						clk.Set(time.Duration(now))
						k := keys[rng.IntN(len(keys))]
						m := models[k]
						cost := 1 + rng.Int64N(N)
						if rng.IntN(2) == 0 {
							cost = 1 + rng.Int64N(min(N, 3))
						}
						fail := func(f string, a ...any) {
							t.Helper()
							t.Fatalf("round %d step %d %v range %d\n%v\n%s", round, step, limit, rng64, trail, fmt.Sprintf(f, a...))
						}
						behind := now/W < hi[k]
						if behind {
							trail = append(trail, fmt.Sprintf("t=%d behind %s", now, k))
							if d, _ := l.AllowN(k, int(cost)); d.Allowed {
								if !m.Take(now, cost) {
									fail("AllowN at t=%d, behind the state's window %d, over-admits: %+v", now, hi[k], d)
								}
							}
							continue
						}
						switch op := rng.IntN(10); op {
						case 0:
							trail = append(trail, fmt.Sprintf("t=%d sweep", now))
							bl.Sweep()
							floorSafe = max(floorSafe, now)
						case 1:
							trail = append(trail, fmt.Sprintf("t=%d refund %s %d", now, k, cost))
							if err := l.Refund(k, int(cost)); err != nil {
								fail("Refund: %v", err)
							}
							if !m.Pending(now) {
								hi[k] = max(hi[k], now/W)
							}
							m.Refund(now, cost)
						case 2, 3:
							wait := rng.Int64N(3*W + 1)
							trail = append(trail, fmt.Sprintf("t=%d reserve %s %d wait %d", now, k, cost, wait))
							res, err := l.Reserve(k, int(cost), time.Duration(wait))
							if err != nil {
								fail("Reserve: %v", err)
							}
							slot := m.Earliest(now, cost)
							ok := slot-now <= wait && slot <= rng64
							if ok {
								m.Reserve(now, cost, wait)
								hi[k] = max(hi[k], slot/W)
							}
							if res.OK() != ok || res.Delay() != time.Duration(slot-now) {
								fail("Reserve = OK %v Delay %d; model %v %d", res.OK(), res.Delay(), ok, slot-now)
							}
						case 4:
							got := l.Peek(k)
							want := modelDecide(m, now, 1, m.Allows(now, 1))
							want.Policy, want.Limit = keyrate.DefaultPolicy, limit
							if got != want {
								fail("t=%d Peek(%s) = %+v\nmodel %+v", now, k, got, want)
							}
						default:
							trail = append(trail, fmt.Sprintf("t=%d allow %s %d", now, k, cost))
							got, err := l.AllowN(k, int(cost))
							if err != nil {
								fail("AllowN: %v", err)
							}
							ok := m.Take(now, cost)
							if ok {
								hi[k] = max(hi[k], now/W)
							}
							want := modelDecide(m, now, cost, ok)
							want.Policy, want.Limit = keyrate.DefaultPolicy, limit
							if got != want {
								fail("t=%d AllowN(%s, %d) = %+v\nmodel %+v", now, k, cost, got, want)
							}
						}
					}
					bl.Close()
				}
			})
		}
	}
}

var windowRounds, windowSeed = func() (int, uint64) {
	if os.Getenv("KEYRATE_WINDOW_LONG") != "" {
		s, _ := strconv.Atoi(os.Getenv("KEYRATE_WINDOW_LONG"))
		return 1500, uint64(s)
	}
	return 60, 99
}()
