package mutexbucket_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
)

// A bucket is swept once it is full again: for PerMinute(3), 20s after a
// single request, and 60s after the bucket was emptied.
func ExampleStore_Sweep() {
	clk := clock.NewManual(0)
	store, _ := mutexbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clk))
	store.Allow("alice")
	for i := 0; i < 3; i++ {
		store.Allow("bob")
	}
	clk.Advance(20 * time.Second)
	fmt.Println("swept at 20s:", store.Sweep(), "left:", store.Len())
	clk.Advance(40 * time.Second)
	fmt.Println("swept at 60s:", store.Sweep(), "left:", store.Len())
	fmt.Printf("%+v\n", store.Stats())
	// Output:
	// swept at 20s: 1 left: 1
	// swept at 60s: 1 left: 0
	// {Keys:0 Evictions:2 Refused:0}
}

// A store capped at two keys fails closed for a third while both are in
// use, and admits it once one of them is idle enough to evict.
func ExampleStore_maxKeys() {
	clk := clock.NewManual(0)
	store, _ := mutexbucket.New(keyrate.PerSecond(2), keyrate.WithClock(clk), keyrate.WithMaxKeys(2))
	store.Allow("alice")
	store.Allow("bob")
	_, err := store.AllowN("carol", 1)
	fmt.Println(errors.Is(err, keyrate.ErrStoreFull), err)
	fmt.Println("alice still served:", store.Allow("alice"))
	clk.Advance(600 * time.Millisecond) // bob is full again; alice (used twice) is not
	d, err := store.AllowN("carol", 1)
	fmt.Println("carol:", d.Allowed, err)
	// Output:
	// true keyrate: store full: it tracks its WithMaxKeys limit of 2 keys and none it examined was full again
	// alice still served: true
	// carol: true <nil>
}
