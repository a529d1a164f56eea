package striped_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/striped"
)

func Example() {
	clk := clock.NewManual(0) // a manual clock keeps the example deterministic
	store, err := striped.New(keyrate.PerMinute(3), keyrate.WithClock(clk))
	if err != nil {
		panic(err) // keyrate.ErrInvalidLimit or ErrInvalidOption, naming the value
	}
	defer store.Close()
	for i := 0; i < 4; i++ {
		fmt.Println("alice:", store.Allow("alice"))
	}
	d, err := store.AllowN("alice", 1)
	if err != nil {
		panic(err) // a cost below 1 or above Burst, or a full store
	}
	fmt.Println("allowed:", d.Allowed, "retry after:", d.RetryAfter)
	_, err = store.AllowN("alice", 4)
	fmt.Println("cost 4:", errors.Is(err, keyrate.ErrCostExceedsBurst), err)
	clk.Advance(20 * time.Second)
	fmt.Println("20s later:", store.Allow("alice"))
	// Output:
	// alice: true
	// alice: true
	// alice: true
	// alice: false
	// allowed: false retry after: 20s
	// cost 4: true keyrate: cost exceeds burst: cost 4 is above the burst of 3
	// 20s later: true
}

func ExampleWithStripes() {
	store, err := striped.New(keyrate.PerSecond(100), striped.WithStripes(64))
	fmt.Println(store != nil, err)
	_, err = striped.New(keyrate.PerSecond(100), striped.WithStripes(100))
	fmt.Println(err)
	// Output:
	// true <nil>
	// keyrate: invalid option: striped.WithStripes: stripe count 100 is not a power of two from 1 to 1048576
}
