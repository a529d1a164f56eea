package redisbucket_test

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
)

// A fleet-wide cap of 2 requests in flight per key, each slot held at
// most a minute if its holder dies. With no Redis to answer (nothing
// listens on port 1), a FallbackLocal store caps each process on its own,
// at the same 2.
func ExampleStore_Inflight() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal))
	if err != nil {
		panic(err)
	}
	caps, err := limiter.Inflight("inflight:", 2, time.Minute)
	if err != nil {
		panic(err)
	}
	a, _ := caps.TryAcquire("alice")
	b, _ := caps.TryAcquire("alice")
	c, err := caps.TryAcquire("alice")
	fmt.Println(a.Acquired(), b.Acquired(), c.Acquired(), err)
	a.Release()
	d, _ := caps.TryAcquire("alice")
	fmt.Println(d.Acquired())
	b.Release()
	d.Release()
	// Output:
	// true true false <nil>
	// true
}
