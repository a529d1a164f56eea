package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// The checks of this file are keyrate.AllowAll's (issue 28, item 3): one
// request decided against several keys of a store, each under its own
// tier, all or nothing. Each takes an OpenCarry, so that every in-process
// store and redisbucket on a real server run them.

// MultiKey is a store and an all-or-nothing call for the checks.
type MultiKey struct {
	// Open builds the store.
	Open OpenCarry
	// AllowAll decides a request; nil is keyrate.AllowAll.
	AllowAll func(keyrate.PolicyLimiter, []keyrate.KeyCost) (keyrate.MultiDecision, error)
	// Atomic marks an AllowAll that decides every key in one step, with
	// no other call between two keys (redisbucket's one script call): the
	// race checks, which run a request between AllowAll's calls, are
	// skipped, and the concurrent check counts its admissions exactly.
	Atomic bool
}

func (m MultiKey) allowAll(pl keyrate.PolicyLimiter, ks []keyrate.KeyCost) (keyrate.MultiDecision, error) {
	if m.AllowAll != nil {
		return m.AllowAll(pl, ks)
	}
	return keyrate.AllowAll(pl, ks)
}

// RunMultiKey runs every AllowAll check on m.
func RunMultiKey(t *testing.T, m MultiKey) {
	t.Run("Steps", func(t *testing.T) { MultiKeySteps(t, m) })
	t.Run("BadInput", func(t *testing.T) { MultiKeyBadInput(t, m) })
	if !m.Atomic {
		t.Run("RaceBeforeFirstSpend", func(t *testing.T) { MultiKeyRaceBeforeFirstSpend(t, m.Open) })
		t.Run("RaceAfterSpend", func(t *testing.T) { MultiKeyRaceAfterSpend(t, m.Open) })
	}
	t.Run("Concurrent", func(t *testing.T) { MultiKeyConcurrent(t, m) })
}

// The tiers of the checks: a user's 2 a minute, an organisation's 3.
var (
	multiUser = keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2)}}
	multiOrg  = keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(3)}}
)

// peekAll returns the PeekTier of every key of ks.
func peekAll(t *testing.T, pl keyrate.PolicyLimiter, ks []keyrate.KeyCost) []keyrate.Decision {
	t.Helper()
	out := make([]keyrate.Decision, len(ks))
	for i, k := range ks {
		d, err := pl.PeekTier(k.Key, k.Tier)
		if err != nil {
			t.Fatalf("PeekTier(%q): %v", k.Key, err)
		}
		out[i] = d
	}
	return out
}

// MultiKeySteps checks AllowAll's decisions one call at a time: a request
// is allowed only while every key holds its cost; the key that denies is
// named, whatever its place in the list, and the other keys are left
// exactly as before (PeekTier equal before and after); an allowed
// request reports the key left with the fewest tokens, the first of
// those; an error from one key (a cost above its Burst) spends nothing on
// any; and a request spent on every key holds, after the fill time, every
// key full again.
func MultiKeySteps(t *testing.T, m MultiKey) {
	pl, clk, tiers := openCarry(t, m.Open, keyrate.PerHour(100), multiUser, multiOrg)
	user, org := tiers[0], tiers[1]
	req := func(who string, userFirst bool) []keyrate.KeyCost {
		u := keyrate.KeyCost{Key: "user:" + who, Tier: user, Cost: 1}
		o := keyrate.KeyCost{Key: "org:acme", Tier: org, Cost: 1}
		if userFirst {
			return []keyrate.KeyCost{u, o}
		}
		return []keyrate.KeyCost{o, u}
	}
	steps := []struct {
		who       string
		userFirst bool
		allowed   bool
		index     int // in the request's order
		policy    string
		remaining int
		retry     time.Duration
	}{
		// alice: user 1 left, org 2: the user is nearest to denying.
		0: {"alice", true, true, 0, "user", 1, 0},
		// Listed second, the user is still the one left with the
		// fewest: 0, the organisation 1.
		1: {"alice", false, true, 1, "user", 0, 0},
		// alice's own limit denies, first or second in the list, and
		// the organisation is not charged.
		2: {"alice", true, false, 0, "user", 0, 30 * time.Second},
		3: {"alice", false, false, 1, "user", 0, 30 * time.Second},
		// bob takes the organisation's last token: both at 1 and 0.
		4: {"bob", false, true, 0, "org", 0, 0},
		// The organisation denies bob, wherever it is in the list, and
		// bob's own bucket is not charged.
		5: {"bob", true, false, 1, "org", 0, 20 * time.Second},
		6: {"bob", false, false, 0, "org", 0, 20 * time.Second},
	}
	for i, st := range steps {
		ks := req(st.who, st.userFirst)
		before := peekAll(t, pl, ks)
		d, err := m.allowAll(pl, ks)
		if err != nil {
			t.Fatalf("step %d: AllowAll: %v", i, err)
		}
		if d.Allowed != st.allowed || d.Index != st.index || d.Policy != st.policy || d.Remaining != st.remaining || d.RetryAfter != st.retry {
			t.Fatalf("step %d: AllowAll(%s, user first %v) = %+v; want allowed %v, key %d (%s), remaining %d, retry after %v",
				i, st.who, st.userFirst, d, st.allowed, st.index, st.policy, st.remaining, st.retry)
		}
		after := peekAll(t, pl, ks)
		for k := range ks {
			switch {
			case !st.allowed && after[k] != before[k]:
				t.Fatalf("step %d: denied, but key %q went from %+v to %+v", i, ks[k].Key, before[k], after[k])
			case st.allowed && after[k].Remaining != before[k].Remaining-1:
				t.Fatalf("step %d: allowed, but key %q went from %d to %d left", i, ks[k].Key, before[k].Remaining, after[k].Remaining)
			}
		}
	}

	// Ties: two keys left with as few tokens go to the first of them.
	ks := []keyrate.KeyCost{{Key: "tie:a", Tier: org, Cost: 2}, {Key: "tie:b", Tier: org, Cost: 2}}
	if d, err := m.allowAll(pl, ks); err != nil || !d.Allowed || d.Index != 0 || d.Remaining != 1 {
		t.Fatalf("two keys of 3 at cost 2 = %+v, %v; want allowed, key 0 with 1 left", d, err)
	}

	// An error on one key spends from none: a cost of 3 fits the org's
	// Burst but not the user's, wherever the user is in the list.
	for _, ks := range [][]keyrate.KeyCost{
		{{Key: "org:err", Tier: org, Cost: 3}, {Key: "user:err", Tier: user, Cost: 3}},
		{{Key: "user:err", Tier: user, Cost: 3}, {Key: "org:err", Tier: org, Cost: 3}},
	} {
		before := peekAll(t, pl, ks)
		if _, err := m.allowAll(pl, ks); !errors.Is(err, keyrate.ErrCostExceedsBurst) {
			t.Fatalf("a cost of 3 against a user's Burst of 2: %v, want ErrCostExceedsBurst", err)
		}
		for k, p := range peekAll(t, pl, ks) {
			if p != before[k] {
				t.Fatalf("an error, but key %q went from %+v to %+v", ks[k].Key, before[k], p)
			}
		}
	}

	// No lasting effect: a minute on, every key is full again.
	clk.Advance(time.Minute)
	for _, k := range []keyrate.KeyCost{{Key: "user:alice", Tier: user}, {Key: "user:bob", Tier: user}, {Key: "org:acme", Tier: org}} {
		d, err := pl.PeekTier(k.Key, k.Tier)
		full := 2
		if k.Tier == org {
			full = 3
		}
		if err != nil || d.Remaining != full {
			t.Fatalf("a minute on, %q = %+v, %v; want %d left", k.Key, d, err, full)
		}
	}
}

// MultiKeyBadInput checks AllowAll's typed errors: an empty or nil list,
// more than keyrate.MaxKeys keys and a key given twice (under two tiers:
// one bucket) wrap keyrate.ErrInvalidKeys, a cost below 1
// keyrate.ErrInvalidCost, a Tier of another store
// keyrate.ErrUnknownPolicy; each names the value and spends nothing. A
// list of exactly MaxKeys keys is decided.
func MultiKeyBadInput(t *testing.T, m MultiKey) {
	pl, _, tiers := openCarry(t, m.Open, keyrate.PerHour(100), multiUser, multiOrg)
	_, _, others := openCarry(t, m.Open, keyrate.PerHour(100), multiUser, multiOrg)
	user, org := tiers[0], tiers[1]
	full := make([]keyrate.KeyCost, keyrate.MaxKeys+1)
	for i := range full {
		full[i] = keyrate.KeyCost{Key: fmt.Sprintf("many:%d", i), Tier: org, Cost: 1}
	}
	cases := []struct {
		name string
		ks   []keyrate.KeyCost
		want error
		says string
	}{
		{"nil", nil, keyrate.ErrInvalidKeys, "no keys"},
		{"empty", []keyrate.KeyCost{}, keyrate.ErrInvalidKeys, "no keys"},
		{"too many", full, keyrate.ErrInvalidKeys, fmt.Sprintf("%d keys, above the most of %d", keyrate.MaxKeys+1, keyrate.MaxKeys)},
		{"duplicate", []keyrate.KeyCost{{Key: "a", Tier: user, Cost: 1}, {Key: "b", Tier: org, Cost: 1}, {Key: "a", Tier: org, Cost: 1}}, keyrate.ErrInvalidKeys, `key 2 ("a") is key 0 again`},
		{"zero cost", []keyrate.KeyCost{{Key: "a", Tier: user, Cost: 1}, {Key: "b", Tier: org}}, keyrate.ErrInvalidCost, `key 1 ("b"): cost 0 is below 1`},
		{"negative cost", []keyrate.KeyCost{{Key: "a", Tier: user, Cost: -1}}, keyrate.ErrInvalidCost, "cost -1"},
		{"other store's tier", []keyrate.KeyCost{{Key: "a", Tier: user, Cost: 1}, {Key: "b", Tier: others[1], Cost: 1}}, keyrate.ErrUnknownPolicy, `key 1 ("b")`},
	}
	for _, c := range cases {
		mine := c.ks[:min(len(c.ks), keyrate.MaxKeys)] // the keys of pl's tiers
		if c.want == keyrate.ErrUnknownPolicy {
			mine = c.ks[:1]
		}
		before := peekAll(t, pl, mine)
		d, err := m.allowAll(pl, c.ks)
		if !errors.Is(err, c.want) || err == nil || !strings.Contains(err.Error(), c.says) || d.Allowed {
			t.Fatalf("%s: AllowAll = %+v, %v; want an error wrapping %v saying %q", c.name, d, err, c.want, c.says)
		}
		for k, p := range peekAll(t, pl, mine) {
			if p != before[k] {
				t.Fatalf("%s: an error, but key %q went from %+v to %+v", c.name, mine[k].Key, before[k], p)
			}
		}
	}
	// The list is checked whole before any key's tier: a key given twice,
	// or a cost below 1, after a key of another store's tier is the
	// list's error, as keyrate.ValidateKeys reports it, on every path.
	for _, c := range []struct {
		name string
		ks   []keyrate.KeyCost
		want error
		says string
	}{
		{"duplicate after another store's tier", []keyrate.KeyCost{{Key: "a", Tier: others[1], Cost: 1}, {Key: "b", Tier: org, Cost: 1}, {Key: "b", Tier: org, Cost: 1}},
			keyrate.ErrInvalidKeys, `key 2 ("b") is key 1 again`},
		{"zero cost after another store's tier", []keyrate.KeyCost{{Key: "a", Tier: others[1], Cost: 1}, {Key: "b", Tier: org}},
			keyrate.ErrInvalidCost, `key 1 ("b"): cost 0 is below 1`},
	} {
		if d, err := m.allowAll(pl, c.ks); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || d.Allowed {
			t.Fatalf("%s: AllowAll = %+v, %v; want an error wrapping %v saying %q (keyrate.ValidateKeys's)", c.name, d, err, c.want, c.says)
		}
	}
	if d, err := m.allowAll(pl, full[:keyrate.MaxKeys]); err != nil || !d.Allowed {
		t.Fatalf("MaxKeys keys = %+v, %v; want allowed", d, err)
	}
}

// hooked is a PolicyLimiter that runs a function once, after a chosen
// call of AllowAll's: the interleaving of another request with the call,
// every run.
type hooked struct {
	keyrate.PolicyLimiter
	peeks    int    // run after this many PeekTier calls, if > 0
	spentKey string // or after the AllowTier of this key
	hook     func()
	n        int
}

func (h *hooked) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	d, err := h.PolicyLimiter.PeekTier(key, tier)
	if h.n++; h.n == h.peeks && h.hook != nil {
		f := h.hook
		h.hook = nil
		f()
	}
	return d, err
}

func (h *hooked) AllowTier(key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	d, err := h.PolicyLimiter.AllowTier(key, tier, cost)
	if key == h.spentKey && h.hook != nil {
		f := h.hook
		h.hook = nil
		f()
	}
	return d, err
}

// MultiKeyRaceBeforeFirstSpend checks a race between AllowAll's check and
// its first spend: another request takes one of the organisation's 3
// tokens there. The organisation, the last key (not checked), is spent
// first and denies its 3; the user's key, checked, is not charged.
func MultiKeyRaceBeforeFirstSpend(t *testing.T, open OpenCarry) {
	pl, _, tiers := openCarry(t, open, keyrate.PerHour(100), multiUser, multiOrg)
	user, org := tiers[0], tiers[1]
	ks := []keyrate.KeyCost{{Key: "user:alice", Tier: user, Cost: 1}, {Key: "org:acme", Tier: org, Cost: 3}}
	h := &hooked{PolicyLimiter: pl, peeks: 1, hook: func() {
		if d, err := pl.AllowTier("org:acme", org, 1); !allowed(t, "the racing request", d, err) {
			t.Fatalf("the racing request for one of the organisation's 3 = %+v", d)
		}
	}}
	before := peekAll(t, pl, ks[:1])
	d, err := keyrate.AllowAll(h, ks)
	if err != nil || d.Allowed || d.Index != 1 || h.hook != nil {
		t.Fatalf("AllowAll after the organisation was drained under it = %+v, %v; want denied by key 1", d, err)
	}
	if after := peekAll(t, pl, ks[:1]); after[0] != before[0] {
		t.Fatalf("denied by the organisation, but the user went from %+v to %+v", before[0], after[0])
	}
}

// MultiKeyRaceAfterSpend checks the race AllowAll's checks in turn cannot
// undo exactly (a wrapper that runs the race hides the store's own path,
// whose undo MultiKeyUndoTouched checks):
// the organisation (4 at once, one a second) is spent first, then, while
// the clock moves on a second, another request takes 3 of its tokens and
// the user's whole bucket, so the user's spend denies. A refund of the
// organisation's 2 at that later reading would hand back a token it
// refilled while full, and the organisation would admit 5 at one instant
// against a Burst of 4 (as ratelimitsvc once admitted 4 of 3 with a
// refund across a window's start). AllowAll gives nothing back: the
// organisation admits nothing more at that instant, and is charged as if
// the request had been allowed on it: 2 tokens fewer than without it
// until it is full again.
func MultiKeyRaceAfterSpend(t *testing.T, open OpenCarry) {
	orgP := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 4}}}
	userP := keyrate.Policy{Name: "user", Limits: []keyrate.Limit{{Rate: 1, Per: time.Second, Burst: 8}}}
	pl, clk, tiers := openCarry(t, open, keyrate.PerHour(100), userP, orgP)
	user, org := tiers[0], tiers[1]
	ks := []keyrate.KeyCost{{Key: "user:alice", Tier: user, Cost: 2}, {Key: "org:acme", Tier: org, Cost: 2}}
	h := &hooked{PolicyLimiter: pl, spentKey: "org:acme", hook: func() {
		clk.Advance(time.Second)
		if d, err := pl.AllowTier("org:acme", org, 3); !allowed(t, "the racing request on the organisation", d, err) {
			t.Fatalf("the racing request for the organisation's 3 = %+v", d)
		}
		if d, err := pl.AllowTier("user:alice", user, 8); !allowed(t, "the racing request on the user", d, err) {
			t.Fatalf("the racing request for the user's 8 = %+v", d)
		}
	}}
	d, err := keyrate.AllowAll(h, ks)
	if err != nil || d.Allowed || d.Index != 0 || h.hook != nil {
		t.Fatalf("AllowAll with the user drained under it = %+v, %v (race run: %v); want denied by key 0", d, err, h.hook == nil)
	}
	more := 0
	for more < 10 {
		d, err := pl.AllowTier("org:acme", org, 1)
		if !allowed(t, "the organisation after the race", d, err) {
			break
		}
		more++
	}
	if 3+more > 4 {
		t.Fatalf("the organisation admitted 3 + %d at one instant, above its Burst of 4: the denied request's spend was given back after a refill", more)
	}
	// The organisation owes the lost 2 and the racing 3 from the
	// instant it was full: 2 tokens 2s on, full 4s on.
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

// MultiKeyConcurrent checks AllowAll under concurrency: goroutines
// released together, each a user of one organisation, with the clock
// frozen for a round and stepped between rounds, the users moving
// between two tiers of one limit (each move a new slot: an in-process
// store's own path leaves such a request to the checks in turn) or
// staying under one (known keys: the store's own path, spends undone
// while other requests spend), and (on a store that bounds its memory)
// a sweeper running throughout. No key admits more than its bound over
// the rounds, Burst + Rate·T/Per, and the organisation, which every
// request charges, admits as many as it spent at most.
func MultiKeyConcurrent(t *testing.T, m MultiKey) {
	t.Run("moving", func(t *testing.T) { multiKeyConcurrent(t, m, true) })
	t.Run("staying", func(t *testing.T) { multiKeyConcurrent(t, m, false) })
}

func multiKeyConcurrent(t *testing.T, m MultiKey, moving bool) {
	userA := keyrate.Policy{Name: "user-a", Limits: []keyrate.Limit{keyrate.PerMinute(5)}}
	userB := keyrate.Policy{Name: "user-b", Limits: []keyrate.Limit{keyrate.PerMinute(5)}}
	orgP := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(20)}}
	eachProcs(t, func(t *testing.T) {
		pl, clk, tiers := openCarry(t, m.Open, keyrate.PerHour(100), userA, userB, orgP)
		org := tiers[2]
		const users, perUser, rounds = 8, 12, 2
		var stop atomic.Bool
		var sweeper sync.WaitGroup
		if b, ok := pl.(keyrate.BoundedLimiter); ok {
			sweeper.Add(1)
			go func() {
				defer sweeper.Done()
				for !stop.Load() {
					b.Sweep()
				}
			}()
		}
		var perKey [users]atomic.Int64
		var total int64
		for r := range rounds {
			if r > 0 {
				clk.Advance(12 * time.Second) // one more token of a user, 4 of the organisation
			}
			total += hammer(users, perUser, func(gi, i int) bool {
				ks := [2]keyrate.KeyCost{
					{Key: fmt.Sprintf("user:%d", gi), Tier: tiers[0], Cost: 1},
					{Key: "org:acme", Tier: org, Cost: 1},
				}
				if moving {
					ks[0].Tier = tiers[i%2]
				}
				if gi%2 == 1 {
					ks[0], ks[1] = ks[1], ks[0]
				}
				d, err := m.allowAll(pl, ks[:])
				if err != nil {
					t.Errorf("AllowAll: %v", err)
					return false
				}
				if d.Allowed {
					perKey[gi].Add(1)
				}
				return d.Allowed
			})
		}
		stop.Store(true)
		sweeper.Wait()
		for u := range perKey {
			if n := perKey[u].Load(); n > 5+1 {
				t.Errorf("user %d admitted %d over 12s, above its bound of 5 + 1", u, n)
			}
		}
		if total > 20+4 || m.Atomic && total != 20+4 {
			t.Errorf("the organisation admitted %d over 12s; its bound is 20 + 4, and an atomic AllowAll, which loses no token to a race, reaches it", total)
		}
		p, err := pl.PeekTier("org:acme", org)
		if err != nil {
			t.Fatal(err)
		}
		// At the end the organisation lacks what it spent, less the 4
		// refilled between the rounds: every admission was spent.
		if spent := int64(20 + 4 - p.Remaining); total > spent {
			t.Errorf("%d admitted but the organisation spent %d", total, spent)
		}
		if total == 0 {
			t.Errorf("nothing admitted")
		}
	})
}

// MultiKeyZeroAllocs checks that AllowAll allocates nothing on keys the
// store knows, allowed or denied, on an in-process store.
func MultiKeyZeroAllocs(t *testing.T, open OpenCarry) {
	pl, _, tiers := openCarry(t, open, keyrate.PerHour(100), multiUser, multiOrg)
	big := keyrate.Policy{Name: "big", Limits: []keyrate.Limit{keyrate.PerSecond(1e6), keyrate.PerHour(1e9)}}
	if err := pl.SetPolicy(big); err != nil {
		t.Fatal(err)
	}
	bigT, err := pl.Tier("big")
	if err != nil {
		t.Fatal(err)
	}
	allowedKs := []keyrate.KeyCost{{Key: "user:a", Tier: bigT, Cost: 1}, {Key: "org:a", Tier: bigT, Cost: 1}}
	deniedKs := []keyrate.KeyCost{{Key: "user:b", Tier: tiers[0], Cost: 2}, {Key: "org:b", Tier: tiers[1], Cost: 1}}
	for _, ks := range [][]keyrate.KeyCost{allowedKs, deniedKs} {
		if _, err := keyrate.AllowAll(pl, ks); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(200, func() {
		keyrate.AllowAll(pl, allowedKs)
		keyrate.AllowAll(pl, deniedKs)
	}); n != 0 {
		t.Fatalf("AllowAll on known keys: %v allocations per run, want 0", n)
	}
	if d, _ := keyrate.AllowAll(pl, deniedKs); d.Allowed || d.Index != 0 {
		t.Fatalf("the denied request = %+v, want denied by key 0", d)
	}
}
