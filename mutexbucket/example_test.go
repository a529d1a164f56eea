package mutexbucket_test

import (
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
)

func Example() {
	clk := clock.NewManual(0) // a manual clock keeps the example deterministic
	store, err := mutexbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 4; i++ {
		fmt.Println("alice:", store.Allow("alice"))
	}
	d, _ := store.AllowN("alice", 1)
	fmt.Println("retry after:", d.RetryAfter)
	clk.Advance(20 * time.Second)
	fmt.Println("20s later:", store.Allow("alice"))
	// Output:
	// alice: true
	// alice: true
	// alice: true
	// alice: false
	// retry after: 20s
	// 20s later: true
}
