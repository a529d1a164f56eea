package conformance_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestEvictionKeepsDecisionsUnderPolicies checks that eviction never
// changes a decision where a key's life is most involved: two stores of
// one kind on one clock see the same calls (spends by policy and by tier,
// which move keys between a token bucket, two windows, a fixed window, a
// sliding window and an unlimited policy; reservations with waits, their
// cancels, refunds, SetPolicy), one of them swept after every call with
// no grace (so a key is evicted the moment it is full, and comes back as a
// new one), the other never swept by anyone (a grace of a century, and no
// cap). Every decision, reservation, cancel and Peek must be equal.
func TestEvictionKeepsDecisionsUnderPolicies(t *testing.T) {
	policies := []keyrate.Policy{
		{Name: "two", Limits: []keyrate.Limit{{Rate: 2, Per: 100 * time.Millisecond, Burst: 3}, {Rate: 7, Per: time.Second, Burst: 9}}},
		{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: 300 * time.Millisecond}.Using(keyrate.FixedWindow)}},
		{Name: "sliding", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: 300 * time.Millisecond}.Using(keyrate.SlidingWindow)}},
		keyrate.Unlimited("free"),
	}
	names := []string{"", "two", "fixed", "sliding", "free"}
	keys := []string{"a", "b", "c", "d"}
	for _, st := range stores {
		for seed := range uint64(4) {
			t.Run(fmt.Sprint(st.name, "/seed=", seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				clk := clock.NewManual(time.Hour)
				policyOf := map[string]string{}
				open := func(grace time.Duration) keyrate.WaitLimiter {
					l, err := st.new(keyrate.Limit{Rate: 3, Per: 200 * time.Millisecond, Burst: 4},
						keyrate.WithClock(clk), keyrate.WithPolicies(policies...), keyrate.WithEvictionGrace(grace),
						keyrate.WithPolicyFunc(func(key string) string { return policyOf[key] }))
					if err != nil {
						t.Fatal(err)
					}
					return l.(keyrate.WaitLimiter)
				}
				swept, kept := open(0), open(100*365*24*time.Hour)
				var rs, rk []keyrate.Reservation
				for i := range 4000 {
					clk.Advance(time.Duration(rng.IntN(80)) * time.Millisecond)
					k := keys[rng.IntN(len(keys))]
					cost := 1 + rng.IntN(3)
					switch op := rng.IntN(100); {
					case op < 35:
						ds, es := swept.AllowN(k, cost)
						dk, ek := kept.AllowN(k, cost)
						if ds != dk || (es == nil) != (ek == nil) {
							t.Fatalf("step %d: AllowN(%q, %d) = %+v, %v swept; %+v, %v kept", i, k, cost, ds, es, dk, ek)
						}
					case op < 50:
						n := names[rng.IntN(len(names))]
						if n == "" {
							n = keyrate.DefaultPolicy
						}
						ts, _ := swept.Tier(n)
						tk, _ := kept.Tier(n)
						ds, es := swept.AllowTier(k, ts, cost)
						dk, ek := kept.AllowTier(k, tk, cost)
						if ds != dk || (es == nil) != (ek == nil) {
							t.Fatalf("step %d: AllowTier(%q, %s, %d) = %+v, %v swept; %+v, %v kept", i, k, n, cost, ds, es, dk, ek)
						}
					case op < 65:
						wait := time.Duration(rng.IntN(400)) * time.Millisecond
						r1, e1 := swept.Reserve(k, cost, wait)
						r2, e2 := kept.Reserve(k, cost, wait)
						if (e1 == nil) != (e2 == nil) || r1.OK() != r2.OK() || r1.At() != r2.At() || r1.Delay() != r2.Delay() {
							t.Fatalf("step %d: Reserve(%q, %d, %v) = OK %v at %v, %v swept; OK %v at %v, %v kept", i, k, cost, wait, r1.OK(), r1.At(), e1, r2.OK(), r2.At(), e2)
						}
						if e1 == nil && r1.OK() {
							rs, rk = append(rs, r1), append(rk, r2)
						}
					case op < 75:
						if len(rs) > 0 {
							j := rng.IntN(len(rs))
							if c1, c2 := rs[j].Cancel(), rk[j].Cancel(); c1 != c2 {
								t.Fatalf("step %d: Cancel of reservation %d (%q, cost %d, at %v) = %v swept, %v kept", i, j, rs[j].Key(), rs[j].Cost(), rs[j].At(), c1, c2)
							}
						}
					case op < 85:
						e1, e2 := swept.Refund(k, cost), kept.Refund(k, cost)
						if (e1 == nil) != (e2 == nil) {
							t.Fatalf("step %d: Refund(%q, %d) = %v swept, %v kept", i, k, cost, e1, e2)
						}
					case op < 92:
						policyOf[k] = names[rng.IntN(len(names))]
					case op < 94:
						p := policies[rng.IntN(2)]
						p.Limits = append([]keyrate.Limit(nil), p.Limits...)
						p.Limits[0].Rate = 1 + rng.IntN(4)
						if p.Limits[0].Algorithm == keyrate.TokenBucket {
							p.Limits[0].Burst = 1 + rng.IntN(4)
						} else {
							p.Limits[0].Burst = p.Limits[0].Rate
						}
						if err := swept.SetPolicy(p); err != nil {
							t.Fatal(err)
						}
						if err := kept.SetPolicy(p); err != nil {
							t.Fatal(err)
						}
					default:
						if ps, pk := swept.Peek(k), kept.Peek(k); ps != pk {
							t.Fatalf("step %d: Peek(%q) = %+v swept, %+v kept", i, k, ps, pk)
						}
					}
					swept.(keyrate.BoundedLimiter).Sweep()
				}
				if swept.(keyrate.BoundedLimiter).Stats().Evictions == 0 || kept.(keyrate.BoundedLimiter).Stats().Evictions != 0 {
					t.Fatalf("evictions: %d swept, %d kept; want some, none", swept.(keyrate.BoundedLimiter).Stats().Evictions, kept.(keyrate.BoundedLimiter).Stats().Evictions)
				}
			})
		}
	}
}
