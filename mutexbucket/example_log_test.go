package mutexbucket_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
)

// The sliding-window log admits at most 3 in any minute, exactly: after 1
// at 0:20 and 2 at 0:59, a request of 2 waits until 1:59, when the two of
// 0:59 leave the window (the one of 0:20 leaving at 1:20 is not enough),
// where a fixed window would open again at 1:00. atomicbucket, which keeps
// one word per key, refuses the log.
func Example_slidingLog() {
	clk := clock.NewManual(0)
	limiter, err := mutexbucket.New(keyrate.PerMinute(3).Using(keyrate.SlidingLog), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	clk.Set(20 * time.Second)
	limiter.Allow("alice")
	clk.Set(59 * time.Second)
	d, _ := limiter.AllowN("alice", 2)
	fmt.Println("0:59:", d.Allowed, d.Remaining)
	for _, at := range []time.Duration{time.Minute, 80 * time.Second, 119 * time.Second} {
		clk.Set(at)
		d, _ = limiter.AllowN("alice", 2)
		fmt.Printf("%v: %v, retry after %v\n", at, d.Allowed, d.RetryAfter)
	}
	_, err = atomicbucket.New(keyrate.PerMinute(3).Using(keyrate.SlidingLog))
	fmt.Println(errors.Is(err, keyrate.ErrUnsupportedAlgorithm))
	// Output:
	// 0:59: true 0
	// 1m0s: false, retry after 59s
	// 1m20s: false, retry after 39s
	// 1m59s: true, retry after 0s
	// true
}
