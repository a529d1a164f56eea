package keyrate_test

import (
	"fmt"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// AllowAll limits a request on a user and its organisation at once: the
// user's tier allows 2 at once, the organisation's 3. A request the user's
// limit denies is not charged to the organisation, so another user of the
// organisation still gets its share.
func ExampleAllowAll() {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerMinute(100), keyrate.WithClock(clk), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(3)}},
	))
	if err != nil {
		panic(err)
	}
	user, _ := store.Tier("user")
	org, _ := store.Tier("org")
	for _, who := range []string{"alice", "alice", "alice", "bob", "bob"} {
		d, err := keyrate.AllowAll(store, []keyrate.KeyCost{
			{Key: "user:" + who, Tier: user, Cost: 1},
			{Key: "org:acme", Tier: org, Cost: 1},
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: allowed=%v key=%d (%s) remaining=%d retry-after=%v\n",
			who, d.Allowed, d.Index, d.Policy, d.Remaining, d.RetryAfter)
	}
	left, _ := store.PeekTier("org:acme", org)
	fmt.Println("org:acme left:", left.Remaining)
	// Output:
	// alice: allowed=true key=0 (user) remaining=1 retry-after=0s
	// alice: allowed=true key=0 (user) remaining=0 retry-after=0s
	// alice: allowed=false key=0 (user) remaining=0 retry-after=30s
	// bob: allowed=true key=1 (org) remaining=0 retry-after=0s
	// bob: allowed=false key=1 (org) remaining=0 retry-after=20s
	// org:acme left: 0
}
