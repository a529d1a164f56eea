package inflight_test

import (
	"fmt"

	"github.com/keyrate/keyrate/inflight"
)

// A key holds at most the limit's slots at once; a release makes room.
func Example() {
	lim, err := inflight.New(2)
	if err != nil {
		panic(err)
	}
	a, _ := lim.TryAcquire("alice")
	b, _ := lim.TryAcquire("alice")
	c, _ := lim.TryAcquire("alice")
	fmt.Println(a.Acquired(), b.Acquired(), c.Acquired())
	a.Release()
	a.Release() // a second release does nothing
	d, _ := lim.TryAcquire("alice")
	e, _ := lim.TryAcquire("alice")
	fmt.Println(d.Acquired(), e.Acquired())
	b.Release()
	d.Release()
	// Output:
	// true true false
	// true false
}
