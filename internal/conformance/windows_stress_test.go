package conformance_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// admission is cost admitted at instant at (a reservation's slot).
type admission struct {
	at   int64
	cost int64
}

// checkWindowBound checks every admission against the algorithm's rule
// with the final counts: each aligned window at most N, and for the
// sliding window p·(W − e) + q(≤e)·W ≤ N·W at each admission's instant.
func checkWindowBound(t *testing.T, alg keyrate.Algorithm, n, w int64, adm []admission) {
	t.Helper()
	sort.Slice(adm, func(i, j int) bool { return adm[i].at < adm[j].at })
	per := map[int64]int64{}
	for _, a := range adm {
		per[a.at/w] += a.cost
	}
	for k, q := range per {
		if q > n {
			t.Fatalf("window %d admitted %d > N=%d", k, q, n)
		}
	}
	if alg != keyrate.SlidingWindow {
		return
	}
	upTo := map[int64]int64{}
	for _, a := range adm {
		k, e := a.at/w, a.at%w
		upTo[k] += a.cost
		lhs := new(big.Int).Mul(big.NewInt(per[k-1]), big.NewInt(w-e))
		lhs.Add(lhs, new(big.Int).Mul(big.NewInt(upTo[k]), big.NewInt(w)))
		if lhs.Cmp(new(big.Int).Mul(big.NewInt(n), big.NewInt(w))) > 0 {
			t.Fatalf("admission at %d (window %d, e=%d): p=%d, q so far %d breaks p·(W−e)+q·W ≤ N·W", a.at, k, e, per[k-1], upTo[k])
		}
	}
}

func TestWindowConcurrentReserveCancelAllow(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
			for si, st := range stores {
				t.Run(fmt.Sprint(alg, "/", st.name, "/mixed=", mixed), func(t *testing.T) {
					const n, w = 20, int64(time.Millisecond)
					limit := keyrate.Limit{Rate: n, Per: time.Duration(w)}.Using(alg)
					clk := clock.NewManual(0)
					l0, err := st.new(limit, keyrate.WithClock(clk), keyrate.WithEvictionGrace(0))
					if err != nil {
						t.Fatal(err)
					}
					l := l0.(keyrate.WaitLimiter)
					if mixed {
						tb := keyrate.Limit{Rate: 30, Per: time.Duration(w), Burst: 7}
						limits := []keyrate.Limit{tb, limit}
						if si%2 == 0 {
							limits = []keyrate.Limit{limit, tb}
						}
						if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: limits}); err != nil {
							t.Fatal(err)
						}
					}
					rng := rand.New(rand.NewPCG(uint64(si), uint64(alg)))
					var mu sync.Mutex
					var adm []admission
					now := int64(0)
					for phase := range 300 {
						switch rng.IntN(5) {
						case 0:
							now = (now/w+1)*w - 1
						case 1:
							now = (now/w + 1) * w
						case 2:
							now += rng.Int64N(w / 3)
						case 3:
							now += rng.Int64N(2 * w)
						}
						clk.Set(time.Duration(now))
						var wg sync.WaitGroup
						gate := make(chan struct{})
						for g := range 6 {
							wg.Add(1)
							seed := uint64(phase*16 + g)
							go func() {
								defer wg.Done()
								r := rand.New(rand.NewPCG(seed, 1))
								<-gate
								type held struct {
									res  keyrate.Reservation
									slot int64
									cost int64
								}
								var mine []held
								var got []admission
								for range 20 {
									switch r.IntN(4) {
									case 0, 1:
										c := 1 + r.Int64N(3)
										if d, _ := l.AllowN("k", int(c)); d.Allowed {
											got = append(got, admission{now, c})
										}
									case 2:
										c := 1 + r.Int64N(5)
										if mixed {
											c = min(c, 7)
										}
										res, err := l.Reserve("k", int(c), time.Duration(r.Int64N(2*w)))
										if err != nil {
											panic(err)
										}
										if res.OK() {
											mine = append(mine, held{res, now + int64(res.Delay()), c})
										}
									case 3:
										if len(mine) > 0 {
											i := r.IntN(len(mine))
											if mine[i].res.Cancel() {
												mine = append(mine[:i], mine[i+1:]...)
											}
										}
									}
								}
								mu.Lock()
								adm = append(adm, got...)
								for _, h := range mine {
									adm = append(adm, admission{h.slot, h.cost})
								}
								mu.Unlock()
							}()
						}
						wg.Add(1)
						go func() { defer wg.Done(); <-gate; l0.(keyrate.BoundedLimiter).Sweep() }()
						close(gate)
						wg.Wait()
					}
					checkWindowBound(t, alg, n, w, adm)
					t.Log(fmt.Sprint(len(adm), " admissions"))
				})
			}
		}
	}
}
