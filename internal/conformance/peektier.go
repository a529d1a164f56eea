package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// PeekTier checks keyrate.PolicyLimiter's PeekTier: it answers what a
// cost-1 AllowTier under the tier would get (Allowed, RetryAfter, the
// window that decides), carrying a key under another policy to the
// tier's only in its answer, and spends and stores nothing: a key peeked
// under a tier at the end of a window admits as many there as one never
// peeked (ratelimitsvc once checked a descriptor with a spend and a
// refund, and a window's start between the two handed the refund to the
// new window: 4 admitted of 3). A Tier of another store is an error
// wrapping keyrate.ErrUnknownPolicy.
func PeekTier(t *testing.T, open OpenCarry) {
	fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.PerMinute(3).Using(keyrate.FixedWindow)}}
	pl, clk, tiers := openCarry(t, open, keyrate.PerHour(10), fixed)
	tier := tiers[0]

	// Under the default policy, 4 of 10 spent: the fixed window of 3 a
	// minute owes them all, so it admits none now.
	if d, err := pl.AllowN("k", 4); !allowed(t, "the default policy's 4", d, err) {
		t.Fatalf("4 of 10 = %+v", d)
	}
	before := pl.Peek("k")
	for range 2 {
		d, err := pl.PeekTier("k", tier)
		if err != nil || d.Allowed || d.Policy != "fixed" || d.RetryAfter <= 0 {
			t.Fatalf("PeekTier under a fixed window of 3 a minute, 4 owed = %+v, %v; want denied with a wait", d, err)
		}
	}
	if after := pl.Peek("k"); after != before {
		t.Fatalf("Peek under the default policy after PeekTier = %+v, before %+v: PeekTier stored its carry", after, before)
	}

	// A key new to the store: PeekTier agrees with AllowTier, and spends
	// nothing, at the last instant of a window and the first of the next.
	clk.Advance(time.Minute - time.Millisecond)
	admitted := 0
	for i := range 4 {
		if i == 2 {
			clk.Advance(time.Millisecond) // the next window
		}
		p, err := pl.PeekTier("fresh", tier)
		if err != nil {
			t.Fatal(err)
		}
		d, err := pl.AllowTier("fresh", tier, 1)
		if p.Allowed != allowed(t, "AllowTier", d, err) || p.Window != d.Window || p.Limit != d.Limit {
			t.Fatalf("request %d: PeekTier = %+v; AllowTier = %+v", i, p, d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Fatalf("%d admitted of 2 at a window's end and 2 at the next one's start under a fixed window of 3, peeked before each; want 4", admitted)
	}
	for range 3 {
		if _, err := pl.PeekTier("full", tier); err != nil {
			t.Fatal(err)
		}
		if d, err := pl.AllowTier("full", tier, 1); !allowed(t, "AllowTier", d, err) {
			t.Fatalf("a fixed window of 3, peeked before each request: denied %+v", d)
		}
	}
	if d, err := pl.PeekTier("full", tier); err != nil || d.Allowed {
		t.Fatalf("PeekTier after 3 of 3 = %+v, %v; want denied", d, err)
	}

	_, _, otherTiers := openCarry(t, open, keyrate.PerHour(10), fixed)
	if _, err := pl.PeekTier("k", otherTiers[0]); !errors.Is(err, keyrate.ErrUnknownPolicy) {
		t.Fatalf("PeekTier with another store's Tier: %v, want ErrUnknownPolicy", err)
	}
}
