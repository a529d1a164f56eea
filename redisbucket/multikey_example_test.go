package redisbucket_test

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
)

// AllowAll decides a request against a user and its organisation, all or
// nothing: on a live server in one script call when the keys share a hash
// tag ("{acme}"). With no Redis to answer (nothing listens on port 1), a
// FallbackLocal store asks keyrate.AllowAll of its in-process fallback,
// here of 2 a minute per key.
func ExampleStore_AllowAll() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
		redisbucket.WithFallbackLimit(keyrate.PerMinute(2)))
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := limiter.AllowAll([]keyrate.KeyCost{
			{Key: "{acme}:user:alice", Cost: 1},
			{Key: "{acme}:org", Cost: 1},
		})
		fmt.Println(d.Allowed, d.Index, d.Remaining, err)
	}
	// Output:
	// true 0 1 <nil>
	// true 0 0 <nil>
	// false 0 0 <nil>
}
