package conformance

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/multi"
)

// The checks of this file are keyrate.AllowAll's undo inside an
// in-process store (internal/multi): the store spends each key in turn,
// and when a later key denies, puts back the earlier keys' states exactly
// where nobody touched them since. Each runs a clock step or another
// request between AllowAll's spend of a key and its undo, every run,
// through the path's test hook (multi.SetAfterSpend).

// RunMultiKeyUndo runs the undo checks on an in-process store.
func RunMultiKeyUndo(t *testing.T, open OpenCarry) {
	t.Run("Exact", func(t *testing.T) { MultiKeyUndoExact(t, open) })
	t.Run("Touched", func(t *testing.T) { MultiKeyUndoTouched(t, open) })
	t.Run("CallerOrder", func(t *testing.T) { MultiKeyUndoCallerOrder(t, open) })
	t.Run("RefundABA", func(t *testing.T) { MultiKeyUndoRefundABA(t, open) })
}

// afterFirstSpend makes AllowAll run f right after its spend of key 0,
// before key 1's (and so before any undo of key 0), once, until the test
// ends; it returns whether f ran.
func afterFirstSpend(t *testing.T, f func()) (ran func() bool) {
	done := false
	t.Cleanup(multi.SetAfterSpend(func(i int) {
		if i == 0 && !done {
			done = true
			f()
		}
	}))
	return func() bool { return done }
}

// MultiKeyUndoExact checks that a denied AllowAll leaves the keys it spent
// before the denier exactly as they were, bit for bit, although the clock
// moved into the organisation's next window between the spend and the
// undo (a step the hook after the first spend makes): beside a twin store with the same history but for the AllowAll,
// the organisation's PeekTier is equal and an exhaust admits as many. A
// refund of the spend at the later reading would not do that for a
// sliding window: it takes the token from the new window, and the old
// window's count, which the estimate still weighs, keeps the spend.
func MultiKeyUndoExact(t *testing.T, open OpenCarry) {
	for _, alg := range []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			orgL := keyrate.Limit{Rate: 4, Per: time.Second, Burst: 4, Algorithm: alg}
			orgP := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{orgL}}
			userP := keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerHour(1)}}
			pls, clks, user, org := twinStores(t, open, userP, orgP) // a window starts at the clock's reading
			for i := range pls {
				// The same history: the organisation spends 2 of 4, the
				// user its only token, 900ms into the window.
				clks[i].Advance(900 * time.Millisecond)
				if d, err := pls[i].AllowTier("org:acme", org[i], 2); !allowed(t, "the organisation's first spend", d, err) {
					t.Fatalf("the organisation's first spend of 2 = %+v", d)
				}
				if d, err := pls[i].AllowTier("user:alice", user[i], 1); !allowed(t, "the user's spend", d, err) {
					t.Fatalf("the user's spend = %+v", d)
				}
			}
			// Store 0: an AllowAll the user denies, the clock stepping
			// 200ms (into the next window) between the organisation's
			// spend and the user's.
			ran := afterFirstSpend(t, func() { clks[0].Advance(200 * time.Millisecond) })
			ks := []keyrate.KeyCost{{Key: "org:acme", Tier: org[0], Cost: 2}, {Key: "user:alice", Tier: user[0], Cost: 1}}
			d, err := keyrate.AllowAll(pls[0], ks)
			if err != nil || d.Allowed || d.Index != 1 || !ran() {
				t.Fatalf("AllowAll(org 2, user 1) = %+v, %v (clock step run: %v); want denied by the user, key 1", d, err, ran())
			}
			clks[1].Advance(200 * time.Millisecond) // the twin: no AllowAll
			var peeks [2]keyrate.Decision
			var admitted [2]int
			for i := range pls {
				if peeks[i], err = pls[i].PeekTier("org:acme", org[i]); err != nil {
					t.Fatal(err)
				}
				for admitted[i] < 10 {
					d, err := pls[i].AllowTier("org:acme", org[i], 1)
					if !allowed(t, "the exhaust", d, err) {
						break
					}
					admitted[i]++
				}
			}
			if peeks[0] != peeks[1] || admitted[0] != admitted[1] {
				t.Fatalf("after a denied AllowAll that spent the organisation and stepped the clock, it reads %+v and admits %d; "+
					"a twin store without the call reads %+v and admits %d: the undo was not exact",
					peeks[0], admitted[0], peeks[1], admitted[1])
			}
		})
	}
}

// MultiKeyUndoTouched checks the undo's other half: a request that spends
// from a key between AllowAll's spend of it and the undo leaves the spend
// in place. The organisation (4 at once, one a second) is spent 2, then,
// a second on, another request takes 3 of its tokens and the user's
// whole bucket, so the user denies. Putting the organisation's old state
// back would erase the racing spend: it would be full, and admit 4 more
// at that instant, 7 against its Burst of 4; a refund of the 2 at that
// reading would admit 2 more, 5 (MultiKeyRaceAfterSpend's case). Kept,
// the spend leaves it empty (charged as if the request had been allowed
// on it), full again 4s on.
func MultiKeyUndoTouched(t *testing.T, open OpenCarry) {
	orgP := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 4}}}
	userP := keyrate.Policy{Name: "user", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 8}}}
	pl, clk, tiers := openCarry(t, open, keyrate.PerHour(100), userP, orgP)
	user, org := tiers[0], tiers[1]
	// Both keys known to the store, and full again.
	for _, k := range []keyrate.KeyCost{{Key: "org:acme", Tier: org}, {Key: "user:alice", Tier: user}} {
		if d, err := pl.AllowTier(k.Key, k.Tier, 1); !allowed(t, "the first spend", d, err) {
			t.Fatalf("the first spend of %s = %+v", k.Key, d)
		}
	}
	clk.Advance(time.Second)
	ran := afterFirstSpend(t, func() {
		clk.Advance(time.Second)
		if d, err := pl.AllowTier("org:acme", org, 3); !allowed(t, "the racing request on the organisation", d, err) {
			t.Fatalf("the racing request for the organisation's 3 = %+v", d)
		}
		if d, err := pl.AllowTier("user:alice", user, 8); !allowed(t, "the racing request on the user", d, err) {
			t.Fatalf("the racing request for the user's 8 = %+v", d)
		}
	})
	ks := []keyrate.KeyCost{{Key: "org:acme", Tier: org, Cost: 2}, {Key: "user:alice", Tier: user, Cost: 2}}
	d, err := keyrate.AllowAll(pl, ks)
	if err != nil || d.Allowed || d.Index != 1 || !ran() {
		t.Fatalf("AllowAll with the user drained under it = %+v, %v (race run: %v); want denied by key 1", d, err, ran())
	}
	more := 0
	for more < 10 {
		d, err := pl.AllowTier("org:acme", org, 1)
		if !allowed(t, "the organisation after the race", d, err) {
			break
		}
		more++
	}
	switch {
	case 3+more > 4:
		t.Fatalf("the organisation admitted 3 + %d at one instant, above its Burst of 4: "+
			"the denied request's spend, which the racing one touched, was given back (put back or refunded)", more)
	case more != 0:
		t.Fatalf("the organisation admitted %d more after the race: the denied request's spend, which the racing one touched, was given back", more)
	}
	for _, w := range []struct {
		after time.Duration
		left  int
	}{{2 * time.Second, 2}, {2 * time.Second, 4}} {
		clk.Advance(w.after)
		if p, err := pl.PeekTier("org:acme", org); err != nil || p.Remaining != w.left {
			t.Fatalf("after the race, the organisation = %+v, %v; want %d left", p, err, w.left)
		}
	}
}

// MultiKeyUndoCallerOrder checks that a store's own path decides known
// keys of one window itself: of three keys, the first two both short of
// their cost, the first under a slower policy (short by 1, 10s to wait),
// the second short by 2 (2s to wait), the first is the one named, the
// short key with the longest wait (keyrate.AllowAll's checks in turn name
// the checked key with the least to spare, the second), and no key is
// charged. It fails on a store that leaves AllowAll to the checks in
// turn.
func MultiKeyUndoCallerOrder(t *testing.T, open OpenCarry) {
	p := keyrate.Policy{Name: "p", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 4}}}
	q := keyrate.Policy{Name: "q", Limits: []keyrate.Limit{{Rate: 1, Per: 10 * time.Second, Burst: 4}}}
	pl, _, tiers := openCarry(t, open, keyrate.PerHour(100), p, q)
	tier, slow := tiers[0], tiers[1]
	for _, k := range []struct {
		key  string
		tier keyrate.Tier
		cost int
	}{{"a", slow, 3}, {"b", tier, 4}, {"c", tier, 1}} { // a holds 1, b 0, c 3
		if d, err := pl.AllowTier(k.key, k.tier, k.cost); !allowed(t, "the setup", d, err) {
			t.Fatalf("the setup's spend of %d from %s = %+v", k.cost, k.key, d)
		}
	}
	ks := []keyrate.KeyCost{{Key: "a", Tier: slow, Cost: 2}, {Key: "b", Tier: tier, Cost: 2}, {Key: "c", Tier: tier, Cost: 1}}
	before := peekAll(t, pl, ks)
	d, err := keyrate.AllowAll(pl, ks)
	if err != nil || d.Allowed || d.Index != 0 || d.Remaining != 1 || d.RetryAfter != 10*time.Second {
		t.Fatalf("AllowAll(a 2, b 2, c 1) = %+v, %v; want denied by a, key 0, the short key with the longest wait (10s), with 1 left", d, err)
	}
	for i, p := range peekAll(t, pl, ks) {
		if p != before[i] {
			t.Fatalf("denied, but key %s went from %+v to %+v", ks[i].Key, before[i], p)
		}
	}
}

// MultiKeyUndoRefundABA checks that the undo's test, "the word still holds
// what the spend wrote", is not fooled by a word that moved and came back:
// a refund capped at the Burst, then a spend, between AllowAll's spend of
// the organisation and its undo. The organisation (2 at once, one a
// second) spent 2 a second ago, so it holds 1. AllowAll spends 1 (none
// left); a racing request's refund of the 2 (capped: it fills the
// bucket), and another's spend of 2, bring the word back to what
// AllowAll wrote; the user denies. A twin store runs the same history
// without the AllowAll: the refund fills the bucket and the spend of 2
// empties it. Putting the old state back (1 left) would admit 3 at one
// instant from the full bucket the refund left, against a Burst of 2.
func MultiKeyUndoRefundABA(t *testing.T, open OpenCarry) {
	orgP := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 2}}}
	userP := keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerHour(1)}}
	pls, clks, user, org := twinStores(t, open, userP, orgP)
	for i := range pls {
		if d, err := pls[i].AllowTier("org:acme", org[i], 2); !allowed(t, "the organisation's spend", d, err) {
			t.Fatalf("the organisation's spend of 2 = %+v", d)
		}
		if d, err := pls[i].AllowTier("user:alice", user[i], 1); !allowed(t, "the user's spend", d, err) {
			t.Fatalf("the user's spend = %+v", d)
		}
		clks[i].Advance(time.Second) // the organisation holds 1
	}
	race := func(i int) {
		if err := pls[i].RefundTier("org:acme", org[i], 2); err != nil {
			t.Fatal(err)
		}
		if d, err := pls[i].AllowTier("org:acme", org[i], 2); !allowed(t, "the racing spend", d, err) {
			t.Fatalf("store %d: the racing spend of 2 after the refund = %+v", i, d)
		}
	}
	ran := afterFirstSpend(t, func() { race(0) })
	ks := []keyrate.KeyCost{{Key: "org:acme", Tier: org[0], Cost: 1}, {Key: "user:alice", Tier: user[0], Cost: 1}}
	d, err := keyrate.AllowAll(pls[0], ks)
	if err != nil || d.Allowed || d.Index != 1 || !ran() {
		t.Fatalf("AllowAll(org 1, user 1) = %+v, %v (race run: %v); want denied by the user, key 1", d, err, ran())
	}
	race(1) // the twin: the same refund and spend, no AllowAll
	var admitted [2]int
	for i := range pls {
		for admitted[i] < 10 {
			d, err := pls[i].AllowTier("org:acme", org[i], 1)
			if !allowed(t, "the exhaust", d, err) {
				break
			}
			admitted[i]++
		}
	}
	if admitted[0] > admitted[1] {
		t.Fatalf("after a denied AllowAll whose spend of the organisation a capped refund and a spend hid (the word came back), "+
			"it admits %d more at that instant, 2 + %d from the full bucket the refund left (Burst 2); a twin store without the call admits %d: "+
			"the undo put back a state the word no longer stood for", admitted[0], admitted[0], admitted[1])
	}
}

// twinStores opens two stores of open, each with the policies userP and
// orgP (tiers user and org) and its own manual clock: one runs a history
// with an AllowAll, its twin the same history without.
func twinStores(t *testing.T, open OpenCarry, userP, orgP keyrate.Policy) (pls [2]keyrate.PolicyLimiter, clks [2]*clock.Manual, user, org [2]keyrate.Tier) {
	t.Helper()
	for i := range pls {
		var tiers []keyrate.Tier
		pls[i], clks[i], tiers = openCarry(t, open, keyrate.PerHour(100), userP, orgP)
		user[i], org[i] = tiers[0], tiers[1]
	}
	return pls, clks, user, org
}
