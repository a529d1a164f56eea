package inflight_test

import (
	"context"
	"errors"
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

// WithReserved keeps slots for critical requests: here 1 of 3, so that a
// client at its cap of ordinary requests still gets a critical one
// through.
func ExampleWithReserved() {
	lim, err := inflight.New(3, inflight.WithReserved(1))
	if err != nil {
		panic(err)
	}
	a, _ := lim.TryAcquire("alice")
	b, _ := lim.TryAcquire("alice")
	c, _ := lim.TryAcquire("alice")
	d, _ := lim.TryAcquireContext(inflight.Critical(context.Background()), "alice")
	fmt.Println(a.Acquired(), b.Acquired(), c.Acquired(), d.Acquired())
	for _, s := range []inflight.Slot{a, b, d} {
		s.Release()
	}
	// Output:
	// true true false true
}

// Acquire waits for a slot until its context is done: a release wakes it.
// A context that ends first gets the zero Slot and an error wrapping the
// context's.
func ExampleStore_Acquire() {
	lim, err := inflight.New(1)
	if err != nil {
		panic(err)
	}
	held, _ := lim.TryAcquire("alice")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = lim.Acquire(ctx, "alice") // the key is at its limit, and ctx is done
	fmt.Println(errors.Is(err, context.Canceled))

	got := make(chan inflight.Slot)
	go func() {
		s, err := lim.Acquire(context.Background(), "alice") // waits for held's release
		if err != nil {
			panic(err)
		}
		got <- s
	}()
	held.Release()
	s := <-got
	fmt.Println(s.Acquired())
	s.Release()
	// Output:
	// true
	// true
}
