package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// A store shared by every process of a service: each key's bucket lives in
// Redis, decided by one script call on the server's clock. (Compiled, not
// run: it needs a redis-server on localhost:6379. The examples below run
// without one.)
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // New requires it: a call must honour its deadline
	})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerSecond(10).WithBurst(20))
	if err != nil {
		panic(err) // an invalid limit, or a server New refuses (see New)
	}
	d, err := limiter.AllowNContext(context.Background(), "client-42", 1)
	switch {
	case err != nil:
		// Redis failed: d is the failure policy's answer (FailClosed by
		// default: a denial), and err wraps redisbucket.ErrUnavailable.
		fmt.Println("rate limiter unavailable:", err)
	case d.Allowed:
		fmt.Println("allowed,", d.Remaining, "left")
	default:
		fmt.Println("denied; retry after", d.RetryAfter)
	}
}

// With no Redis to answer (nothing listens on port 1), a FailClosed store
// denies and says why.
func ExampleFailClosed() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond))
	if err != nil {
		panic(err)
	}
	d, err := limiter.AllowN("alice", 1)
	fmt.Println(d.Allowed, d.RetryAfter, errors.Is(err, redisbucket.ErrUnavailable))
	fmt.Printf("%+v\n", limiter.Stats())
	// Output:
	// false 1s true
	// {Calls:1 Errors:1 Degraded:1 Malformed:0 DeniedLocally:0 Leases:0 Leased:0 BreakerOpen:false BreakerOpens:0 BreakerCloses:0 ShortCircuited:0 FleetNodes:0}
}

// With no Redis to answer, a FallbackLocal store limits each process on its
// own, here to 2 a minute per key.
func ExampleFallbackLocal() {
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
		d, err := limiter.AllowN("alice", 1)
		fmt.Println(d.Allowed, d.Remaining, err)
	}
	// Output:
	// true 1 <nil>
	// true 0 <nil>
	// false 0 <nil>
}

// New checks that Redis may not evict buckets (maxmemory-policy
// noeviction). When it cannot tell, here because nothing listens on port 1,
// the store still starts and PolicyCheck says why; a server that may evict
// would have made New fail with ErrEvictingPolicy.
func ExampleStore_PolicyCheck() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond))
	fmt.Println(err)
	err = limiter.PolicyCheck()
	fmt.Println(errors.Is(err, redisbucket.ErrPolicyUnchecked), errors.Is(err, redisbucket.ErrUnavailable))
	// Output:
	// <nil>
	// true true
}

// Tiers pick a policy per request: here "internal" is unlimited, so it is
// answered without a call to Redis, which is down (nothing listens on port
// 1), while "free" needs Redis and, under FailClosed, is denied until the
// tokens of both its windows could have accrued. A tier the store lacks
// is an error.
func ExampleStore_AllowTier() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		keyrate.WithPolicies(
			keyrate.Policy{Name: "free", Limits: []keyrate.Limit{keyrate.PerSecond(1), keyrate.PerHour(100)}},
			keyrate.Unlimited("internal")))
	if err != nil {
		panic(err)
	}
	internal, _ := limiter.Tier("internal")
	d, err := limiter.AllowTier("build-bot", internal, 1)
	fmt.Println(d.Allowed, d.Policy, err)

	free, _ := limiter.Tier("free")
	d, err = limiter.AllowTier("alice", free, 1)
	fmt.Println(d.Allowed, d.Policy, d.RetryAfter, errors.Is(err, redisbucket.ErrUnavailable))

	_, err = limiter.Tier("gold")
	fmt.Println(err)
	// Output:
	// true internal <nil>
	// false free 36s true
	// keyrate: unknown policy: "gold"
}

// With no Redis to answer, a FallbackLocal store limits each process on its
// own, under the same policies: here the two windows of "free", of which
// the hour's allows 2.
func ExampleFallbackLocal_policies() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
		keyrate.WithPolicies(keyrate.Policy{Name: "free", Limits: []keyrate.Limit{keyrate.PerMinute(10), keyrate.PerHour(2)}}))
	if err != nil {
		panic(err)
	}
	free, _ := limiter.Tier("free")
	for range 3 {
		d, err := limiter.AllowTier("alice", free, 1)
		fmt.Println(d.Allowed, d.Window, d.Remaining, err)
	}
	// Output:
	// true 1 1 <nil>
	// true 1 0 <nil>
	// false 1 0 <nil>
}

// Reserve takes tokens for a slot at most a maximum wait away, and Wait
// sleeps until its slot. With no Redis to answer, a FallbackLocal store
// reserves in its fallback store, here at 2 a minute per key: a third
// request waits 30s, or gives its reservation up; a Wait whose deadline
// comes first fails at once.
func ExampleStore_Reserve() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
		redisbucket.WithFallbackLimit(keyrate.PerMinute(2)))
	if err != nil {
		panic(err)
	}
	var last keyrate.Reservation
	for range 3 {
		last, err = limiter.Reserve("alice", 1, time.Minute)
		fmt.Println(last.OK(), last.Delay().Round(10*time.Second), err)
	}
	fmt.Println(last.Cancel())

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = limiter.Wait(ctx, "alice", 1)
	fmt.Println(errors.Is(err, keyrate.ErrWaitExceedsDeadline), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true 0s <nil>
	// true 0s <nil>
	// true 30s <nil>
	// true
	// true true
}

// With no Redis to answer (nothing listens on port 1), a circuit breaker
// of two failures opens after two calls that fail; the third is answered
// at once by the failure policy, sending nothing, until the back-off ends.
func ExampleWithBreaker() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	backoff := clock.NewManual(0) // a test's clock; clock.System() by default
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithEvictionAllowed(),
		redisbucket.WithBreaker(redisbucket.Breaker{Failures: 2, Backoff: time.Second, Clock: backoff}))
	if err != nil {
		panic(err)
	}
	for range 3 {
		_, err := limiter.AllowN("alice", 1)
		fmt.Println(errors.Is(err, redisbucket.ErrUnavailable), errors.Is(err, redisbucket.ErrCircuitOpen))
	}
	st := limiter.Stats()
	fmt.Println(st.Calls, st.Errors, st.ShortCircuited, st.BreakerOpen)
	backoff.Advance(time.Second) // the back-off ends: the next call probes
	_, _ = limiter.AllowN("alice", 1)
	fmt.Println(limiter.Stats().Calls, limiter.Stats().BreakerOpens)
	// Output:
	// true false
	// true false
	// true true
	// 2 2 1 true
	// 3 2
}

// A fleet of 4 processes, each with WithFallbackNodes(4), divides the
// fallback's limits among them while Redis is down (nothing listens on
// port 1): each process's fallback holds a quarter of the burst of 8.
func ExampleWithFallbackNodes() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(8),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithEvictionAllowed(),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
		redisbucket.WithFallbackNodes(4))
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, err := limiter.AllowN("alice", 1)
		fmt.Println(d.Allowed, d.Limit, err)
	}
	// Output:
	// true 8 per 4m0s, burst 2 <nil>
	// true 8 per 4m0s, burst 2 <nil>
	// false 8 per 4m0s, burst 2 <nil>
}

// A keyrate.SlidingLog limit admits at most N in any window of length W,
// here 3 a second; redisbucket accepts N up to MaxLogRate. Reserve and
// Wait are refused under a log, as in process, sending nothing; with
// nothing listening on port 1, FailClosed denies until a whole window
// could have passed.
func ExampleMaxLogRate() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	_, err := redisbucket.New(client, keyrate.Limit{Rate: redisbucket.MaxLogRate + 1, Per: time.Second}.Using(keyrate.SlidingLog))
	fmt.Println(errors.Is(err, keyrate.ErrInvalidLimit))
	limiter, err := redisbucket.New(client, keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingLog),
		redisbucket.WithEvictionAllowed(), redisbucket.WithTimeout(20*time.Millisecond))
	if err != nil {
		panic(err)
	}
	_, err = limiter.Reserve("alice", 1, time.Second)
	fmt.Println(errors.Is(err, keyrate.ErrUnsupportedAlgorithm))
	d, err := limiter.AllowN("alice", 1)
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter, errors.Is(err, redisbucket.ErrUnavailable))
	// Output:
	// true
	// true
	// false 0 1s true
}

// WithPipelining changes no answer: here, with no Redis to answer
// (nothing listens on port 1), eight concurrent calls, queued behind the
// two in flight and sent together, are each denied by the failure policy
// and counted as a call, as without it. Its fields are checked by New.
func ExampleWithPipelining() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
		redisbucket.WithTimeout(20*time.Millisecond),
		redisbucket.WithEvictionAllowed(),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 2, MaxBatch: 16}))
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	var unavailable atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			if d, err := limiter.AllowN(fmt.Sprint("user-", i), 1); !d.Allowed && errors.Is(err, redisbucket.ErrUnavailable) {
				unavailable.Add(1)
			}
		})
	}
	wg.Wait()
	st := limiter.Stats()
	fmt.Println(unavailable.Load(), st.Calls, st.Errors, st.Degraded)
	_, err = redisbucket.New(client, keyrate.PerMinute(60), redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: -1}))
	fmt.Println(errors.Is(err, keyrate.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// 8 8 8 8
	// true
	// keyrate: invalid option: redisbucket.WithPipelining: pipelining InFlight -1 is not from 0 (the default) to 1024
}
