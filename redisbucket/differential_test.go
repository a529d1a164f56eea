package redisbucket_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestDifferential replays one random schedule, in whole µs, on a
// redisbucket.Store (without and with WithDenyCache, on one server and on
// a Redis Cluster) and an
// atomicbucket.Store, and requires every Decision to be equal, field for
// field. The limits include token intervals that
// are not whole µs (3 per 10s, 7 per 3s), one that is not whole ns
// (Policy's exact scale), and one Policy rounds up (coarse).
func TestDifferential(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) { differential(t, b.client(t)) })
	}
}

// differential is TestDifferential on client's Redis.
func differential(t *testing.T, client redis.UniversalClient) {
	for _, limit := range []keyrate.Limit{
		keyrate.PerMinute(3),
		keyrate.PerSecond(10).WithBurst(4),
		{Rate: 3, Per: 10 * time.Second, Burst: 3},
		{Rate: 7, Per: 3 * time.Second, Burst: 5},
		{Rate: 1, Per: 1001 * time.Nanosecond, Burst: 3},
		{Rate: 999_983, Per: time.Second, Burst: 40},
		keyrate.PerSecond(1000).WithBurst(1_000_000),
	} {
		for _, cache := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/deny-cache=%v", limit, cache), func(t *testing.T) {
				pol, err := rules.NewRule(limit, nil)
				if err != nil {
					t.Fatal(err)
				}
				clk := clock.NewManual(start)
				want, err := atomicbucket.New(limit, keyrate.WithClock(clk))
				if err != nil {
					t.Fatal(err)
				}
				opts := []keyrate.Option{redisbucket.WithTimeSource(clk),
					redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}
				if cache {
					opts = append(opts, redisbucket.WithDenyCache(16))
				}
				got := mustNew(t, client, limit, opts...)
				rng := rand.New(rand.NewPCG(1, uint64(limit.Rate)))
				interval := limit.Per / time.Duration(limit.Rate)
				at := time.Duration(0)
				for i := 0; i < 300; i++ {
					// Steps of up to two token intervals, in whole µs; one in
					// ten goes back (never before the stores' creation).
					step := time.Duration(rng.Int64N(int64(2*interval/time.Microsecond)+1)) * time.Microsecond
					if rng.IntN(10) == 0 {
						step = -step
					}
					at = max(at+step, 0)
					clk.Set(start + at)
					key := fmt.Sprint("k", rng.IntN(3))
					if rng.IntN(4) == 0 {
						if g, w := got.Peek(key), want.Peek(key); g != w {
							t.Fatalf("op %d at +%v: Peek(%s) = %+v, want %+v (exact %v)", i, at, key, g, w, pol.Exact())
						}
						continue
					}
					cost := 1 + rng.IntN(min(limit.Burst, 3))
					g, gerr := got.AllowN(key, cost)
					w, werr := want.AllowN(key, cost)
					if g != w || gerr != nil || werr != nil {
						t.Fatalf("op %d at +%v: AllowN(%s, %d) = %+v, %v; want %+v, %v (exact %v)", i, at, key, cost, g, gerr, w, werr, pol.Exact())
					}
				}
			})
		}
	}
}
