package keyrate_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// A store answers per key; each key has its own bucket.
func Example() {
	limiter, err := atomicbucket.New(keyrate.PerSecond(2))
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"alice", "alice", "alice", "bob"} {
		fmt.Println(key, limiter.Allow(key))
	}
	// Output:
	// alice true
	// alice true
	// alice false
	// bob true
}

// AllowN returns a Decision with what an HTTP server needs for a 429.
func Example_decision() {
	clk := clock.NewManual(0)
	limiter, _ := atomicbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clk))
	for i := 0; i < 4; i++ {
		d, _ := limiter.AllowN("client-42", 1)
		fmt.Printf("allowed=%v remaining=%d retry-after=%v reset-after=%v\n",
			d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
	}
	// Output:
	// allowed=true remaining=2 retry-after=0s reset-after=20s
	// allowed=true remaining=1 retry-after=0s reset-after=40s
	// allowed=true remaining=0 retry-after=0s reset-after=1m0s
	// allowed=false remaining=0 retry-after=20s reset-after=1m0s
}

// Errors are typed: test them with errors.Is.
func Example_errors() {
	limiter, _ := atomicbucket.New(keyrate.PerSecond(5))
	_, err := limiter.AllowN("k", 6)
	fmt.Println(errors.Is(err, keyrate.ErrCostExceedsBurst), err)
	_, err = atomicbucket.New(keyrate.Limit{Rate: 5, Per: time.Second})
	fmt.Println(errors.Is(err, keyrate.ErrInvalidLimit), err)
	// Output:
	// true keyrate: cost exceeds burst: cost 6 is above the burst of 5
	// true keyrate: invalid limit: Burst 0 is below 1
}

func ExampleLimit_WithBurst() {
	l := keyrate.PerSecond(10).WithBurst(50)
	fmt.Println(l, "- fills in", l.FillTime())
	// Output: 10 per 1s, burst 50 - fills in 5s
}

func ExampleEvery() {
	fmt.Println(keyrate.Every(2 * time.Second))
	// Output: 1 per 2s, burst 1
}

// A policy enforces several limits at once, all or nothing: here at most
// 2 a second, and 3 a minute. A store gives it to a request through a
// Tier.
func ExamplePolicy() {
	clk := clock.NewManual(0)
	p := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{
		keyrate.PerSecond(2),
		keyrate.PerMinute(3),
	}}
	limiter, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(p))
	if err != nil {
		panic(err)
	}
	pro, err := limiter.Tier("pro")
	if err != nil {
		panic(err)
	}
	for _, at := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		clk.Set(at)
		d, _ := limiter.AllowTier("alice", pro, 1)
		fmt.Printf("%v: allowed=%v window=%d (%v) remaining=%d retry-after=%v\n",
			at, d.Allowed, d.Window, d.Limit, d.Remaining, d.RetryAfter)
	}
	// Output:
	// 0s: allowed=true window=0 (2 per 1s, burst 2) remaining=1 retry-after=0s
	// 0s: allowed=true window=0 (2 per 1s, burst 2) remaining=0 retry-after=0s
	// 0s: allowed=false window=0 (2 per 1s, burst 2) remaining=0 retry-after=500ms
	// 1s: allowed=true window=1 (3 per 1m0s, burst 3) remaining=0 retry-after=0s
	// 2s: allowed=false window=1 (3 per 1m0s, burst 3) remaining=0 retry-after=18s
}

// Using picks a window algorithm. A fixed window of 3 a minute lets 3
// through at the end of one minute and 3 more at the start of the next; a
// sliding window counts the previous minute's 3 at the weight of the part
// of it that the last minute still covers.
func ExampleLimit_Using() {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		clk := clock.NewManual(0)
		limiter, err := atomicbucket.New(keyrate.PerMinute(3).Using(alg), keyrate.WithClock(clk))
		if err != nil {
			panic(err)
		}
		clk.Set(59 * time.Second)
		d, _ := limiter.AllowN("alice", 3) // the minute's last second
		fmt.Println(alg, "at 0:59:", d.Allowed)
		for _, at := range []time.Duration{time.Minute, 80 * time.Second} {
			clk.Set(at)
			d, _ = limiter.AllowN("alice", 1)
			fmt.Printf("%v at %v: %v, retry after %v\n", alg, at, d.Allowed, d.RetryAfter)
		}
	}
	// Output:
	// fixed-window at 0:59: true
	// fixed-window at 1m0s: true, retry after 0s
	// fixed-window at 1m20s: true, retry after 0s
	// sliding-window at 0:59: true
	// sliding-window at 1m0s: false, retry after 20s
	// sliding-window at 1m20s: true, retry after 0s
}
