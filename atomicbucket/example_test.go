package atomicbucket_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
)

func Example() {
	clk := clock.NewManual(0) // a manual clock keeps the example deterministic
	store, err := atomicbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clk))
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

// Tiers: one store, a policy per client plan, chosen per request with a
// Tier handle the caller resolved once (it knows the plan after
// authentication). An unlimited tier admits everything and stores nothing.
func Example_tiers() {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerMinute(2), // the default policy
		keyrate.WithClock(clk),
		keyrate.WithPolicies(
			keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(5)}},
			keyrate.Unlimited("internal"),
		))
	if err != nil {
		panic(err)
	}
	pro, _ := store.Tier("pro")
	internal, _ := store.Tier("internal")
	count := func(key string, tier keyrate.Tier) (n int) {
		for i := 0; i < 10; i++ {
			if d, _ := store.AllowTier(key, tier, 1); d.Allowed {
				n++
			}
		}
		return n
	}
	fmt.Println("free:", count("alice", keyrate.Tier{}))
	fmt.Println("pro:", count("bob", pro))
	fmt.Println("internal:", count("batch", internal))

	// Upgrading a policy takes effect at bob's next request: the 5 tokens
	// he spent carry over, so he holds 595 of the new 600 a minute.
	store.SetPolicy(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(600)}})
	fmt.Println("pro, upgraded:", count("bob", pro))
	clk.Advance(time.Second)
	fmt.Println("a second later:", count("bob", pro))
	// Output:
	// free: 2
	// pro: 5
	// internal: 10
	// pro, upgraded: 10
	// a second later: 10
}

// A two-window policy caps bursts and a quota at once: a request is
// allowed only if both windows hold its cost, and then spends from both.
// The decision says which window denied.
func Example_twoWindows() {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk),
		keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{
			keyrate.PerSecond(5),  // at most 5 at once, 5 a second
			keyrate.PerMinute(12), // and at most 12 a minute
		}}))
	if err != nil {
		panic(err)
	}
	for second := 0; second < 4; second++ {
		allowed := 0
		var last keyrate.Decision
		for i := 0; i < 10; i++ {
			if d, _ := store.AllowN("alice", 1); d.Allowed {
				allowed++
			} else {
				last = d
			}
		}
		fmt.Printf("second %d: %d allowed, then denied by window %d (%v), retry after %v\n",
			second, allowed, last.Window, last.Limit, last.RetryAfter)
		clk.Advance(time.Second)
	}
	// Output:
	// second 0: 5 allowed, then denied by window 0 (5 per 1s, burst 5), retry after 200ms
	// second 1: 5 allowed, then denied by window 0 (5 per 1s, burst 5), retry after 200ms
	// second 2: 2 allowed, then denied by window 1 (12 per 1m0s, burst 12), retry after 3s
	// second 3: 0 allowed, then denied by window 1 (12 per 1m0s, burst 12), retry after 2s
}

// Refund gives back tokens a request did not use: reserve an estimate,
// then return what the request turned out not to need. It is exact, and
// never fills a bucket above its Burst.
func ExampleStore_Refund() {
	clk := clock.NewManual(0)
	store, _ := atomicbucket.New(keyrate.PerMinute(100), keyrate.WithClock(clk))

	d, _ := store.AllowN("llm-user", 60) // reserve an estimate of 60 tokens
	fmt.Println("reserved:", d.Allowed, "remaining:", d.Remaining)
	store.Refund("llm-user", 60-22) // the answer cost 22: give back 38
	fmt.Println("after refund:", store.Peek("llm-user").Remaining)
	store.Refund("llm-user", 100)
	fmt.Println("refund past full:", store.Peek("llm-user").Remaining)
	// Output:
	// reserved: true remaining: 40
	// after refund: 78
	// refund past full: 100
}

// ExampleWithHotKeys marks one key hot: its calls are served from per-CPU
// shards of its tokens instead of all swapping one word. It still admits
// exactly its burst with the clock stopped, and no more than its rate after.
func ExampleWithHotKeys() {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerSecond(1_000_000).WithBurst(1000),
		keyrate.WithClock(clk), atomicbucket.WithHotKeys("tenant-42"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	count := func() (n int) {
		for store.Allow("tenant-42") {
			n++
		}
		return n
	}
	fmt.Println("admitted at t=0:", count())
	clk.Advance(500 * time.Microsecond) // 500 tokens refill
	fmt.Println("admitted at t=0.5ms:", count())
	d, _ := store.AllowN("tenant-42", 1)
	fmt.Println("then:", d.Allowed, "retry after:", d.RetryAfter)
	_, err = mutexbucket.New(keyrate.PerSecond(1), atomicbucket.WithHotKeys("tenant-42"))
	fmt.Println("other stores:", errors.Is(err, keyrate.ErrInvalidOption))
	// Output:
	// admitted at t=0: 1000
	// admitted at t=0.5ms: 500
	// then: false retry after: 1µs
	// other stores: true
}
