package keyrate_test

import (
	"errors"
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

// ValidateKeys checks a key list as AllowAll does before deciding
// anything; its errors name the key's index and the bound.
func ExampleValidateKeys() {
	for _, keys := range [][]keyrate.KeyCost{
		{{Key: "user:alice", Cost: 1}, {Key: "org:acme", Cost: 1}},
		{},
		{{Key: "user:alice", Cost: 1}, {Key: "user:alice", Cost: 2}},
		{{Key: "user:alice", Cost: 0}},
	} {
		err := keyrate.ValidateKeys(keys)
		fmt.Println(errors.Is(err, keyrate.ErrInvalidKeys), errors.Is(err, keyrate.ErrInvalidCost), err)
	}
	// Output:
	// false false <nil>
	// true false keyrate: invalid key list: no keys (at least 1)
	// true false keyrate: invalid key list: key 1 ("user:alice") is key 0 again
	// false true keyrate: invalid cost: key 0 ("user:alice"): cost 0 is below 1
}
