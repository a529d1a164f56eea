package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/keyrate/keyrate/clock"
)

func ExampleManual() {
	c := clock.NewManual(0)
	c.Advance(1500 * time.Millisecond)
	fmt.Println(c.Now())
	c.Set(time.Second) // backwards, to test stale readings
	fmt.Println(c.Now())
	// Output:
	// 1.5s
	// 1s
}

// A goroutine sleeping on a Manual clock wakes when the test moves the
// clock to its reading: AwaitSleepers waits until it sleeps, and Step
// moves the clock to the earliest reading anyone waits for.
func ExampleManual_Step() {
	c := clock.NewManual(0)
	woke := make(chan time.Duration)
	go func() {
		clock.SleepUntil(context.Background(), c, 3*time.Second)
		woke <- c.Now()
	}()
	c.AwaitSleepers(context.Background(), 1)
	next, _ := c.Next()
	fmt.Println("sleeping until", next)
	c.Step()
	fmt.Println("woke at", <-woke)
	// Output:
	// sleeping until 3s
	// woke at 3s
}
