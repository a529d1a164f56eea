package clock_test

import (
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
