package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// OpenCarry builds a store whose default policy is def, with policies
// beside it, on a manual clock that reads the start of a second, a minute
// and an hour of the store's windows, and returns it; the store is closed
// when the test ends. It returns a nil PolicyLimiter if the store refuses
// a policy's algorithm (keyrate.ErrUnsupportedAlgorithm: atomicbucket and
// a keyrate.SlidingLog).
type OpenCarry func(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual)

// The checks of this file are the over-admissions of issue 31 through a
// change of policy, each written for the rule of docs/design/carry.md:
// the tokens a key has spent and not yet refilled under its old policy
// are owed whole under the new one, counted as spent at the carry
// instant.

// openCarry opens a store with open, skipping the test if the store
// refuses one of the policies' algorithms, and returns it with its clock
// and the tiers of policies, in order.
func openCarry(t *testing.T, open OpenCarry, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual, []keyrate.Tier) {
	t.Helper()
	pl, clk := open(t, def, policies...)
	if pl == nil {
		t.Skip("the store refuses one of the policies' algorithms")
	}
	tiers := make([]keyrate.Tier, len(policies))
	for i, p := range policies {
		tier, err := pl.Tier(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		tiers[i] = tier
	}
	return pl, clk, tiers
}

// NewOpenCarry is OpenCarry for a store made by newStore on a manual
// clock at its epoch (every window starts there), with opts.
func NewOpenCarry(newStore func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error), opts ...keyrate.Option) OpenCarry {
	return func(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
		clk := clock.NewManual(time.Hour)
		l, err := newStore(def, append([]keyrate.Option{keyrate.WithClock(clk), keyrate.WithPolicies(policies...)}, opts...)...)
		if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			return nil, clk
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.(keyrate.BoundedLimiter).Close() })
		return l.(keyrate.PolicyLimiter), clk
	}
}

// allowed reports whether f's decision allowed the request, failing the
// test on an error.
func allowed(t *testing.T, what string, d keyrate.Decision, err error) bool {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return d.Allowed
}

// CarryWindowAhead checks that a window state counted ahead owes every
// window it counts when carried out. A token bucket's debt above a
// window's N spills into the windows after the current one; carried back,
// the state once owed only the last window's counts, from that window's
// start, as time the bucket then refilled at its own rate: default
// PerHour(100), tier PerSecond(3) of a window algorithm, at one instant:
// 100 admitted, the tier's request denied (it carries), then 90 more
// admitted (955 in ten such round trips) against a burst of 100. The same
// debt carried on into a fixed window of 10 a minute counted as 4.
func CarryWindowAhead(t *testing.T, open OpenCarry) {
	for _, alg := range []keyrate.Algorithm{keyrate.SlidingWindow, keyrate.FixedWindow} {
		t.Run("alg="+alg.String(), func(t *testing.T) {
			win := keyrate.Policy{Name: "win", Limits: []keyrate.Limit{keyrate.PerSecond(3).Using(alg)}}
			fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.PerMinute(10).Using(keyrate.FixedWindow)}}
			pl, clk, tiers := openCarry(t, open, keyrate.PerHour(100), win, fixed)
			if d, err := pl.AllowN("k", 100); !allowed(t, "the bucket's burst", d, err) {
				t.Fatalf("the bucket's burst of 100 = %+v", d)
			}
			admitted := 100
			for range 10 {
				d, err := pl.AllowTier("k", tiers[0], 1)
				if allowed(t, "the window's request", d, err) {
					admitted++
				}
				d, err = pl.AllowN("k", 90)
				if allowed(t, "the bucket's 90", d, err) {
					admitted += 90
				}
			}
			if admitted > 100 {
				t.Fatalf("%d admitted at one instant by a key moved between PerHour(100) and PerSecond(3) of a %v, ten times; a burst of 100 allows 100", admitted, alg)
			}
			if d := pl.Peek("k"); d.Allowed || d.Remaining != 0 {
				t.Fatalf("Peek after the round trips = %+v, want nothing left", d)
			}
			// On into the fixed window of 10 a minute: the 100 owed are
			// ten of its windows.
			for m := range 10 {
				d, err := pl.AllowTier("k", tiers[1], 1)
				if allowed(t, "the fixed window's request", d, err) {
					t.Fatalf("minute %d under a fixed window of 10 a minute, 100 owed: allowed %+v", m, d)
				}
				clk.Advance(time.Minute)
			}
		})
	}
}

// CarryIntoLog checks that a debt carried into a log stays there until
// the log's rate would have let it through: 100 owed under PerHour(100),
// moved to a log of 50 an hour, once counted as 3 (47 admitted at once).
func CarryIntoLog(t *testing.T, open OpenCarry) {
	log := keyrate.Policy{Name: "log", Limits: []keyrate.Limit{keyrate.PerHour(50).Using(keyrate.SlidingLog)}}
	pl, clk, tiers := openCarry(t, open, keyrate.PerHour(100), log)
	if d, err := pl.AllowN("k", 100); !allowed(t, "the bucket's burst", d, err) {
		t.Fatalf("the bucket's burst of 100 = %+v", d)
	}
	// 100 owed, 50 an hour: two of the log's windows.
	start := clk.Now()
	for _, at := range []time.Duration{0, time.Hour, 2*time.Hour - time.Millisecond} {
		clk.Set(start + at)
		if d, err := pl.AllowTier("k", tiers[0], 1); allowed(t, "the log's request", d, err) {
			t.Fatalf("%v after 100 owed were moved into a log of 50 an hour: allowed %+v", at, d)
		}
	}
	clk.Set(start + 2*time.Hour)
	if d, err := pl.AllowTier("k", tiers[0], 50); !allowed(t, "the log's request", d, err) {
		t.Fatalf("2h after 100 owed were moved into a log of 50 an hour, 50 = %+v, want allowed", d)
	}
}

// CarryRefundOverN checks that a log holding a debt carried from another
// policy above its N gives nothing back on a refund, as a token bucket
// owing more than its Burst does: 10 spent under PerHour(10), moved to a
// log of 3 an hour, refunded 3 there, once held 3 back under PerHour(10).
func CarryRefundOverN(t *testing.T, open OpenCarry) {
	log := keyrate.Policy{Name: "log", Limits: []keyrate.Limit{keyrate.PerHour(3).Using(keyrate.SlidingLog)}}
	pl, _, tiers := openCarry(t, open, keyrate.PerHour(10), log)
	if d, err := pl.AllowN("k", 10); !allowed(t, "the bucket's burst", d, err) {
		t.Fatalf("the bucket's burst of 10 = %+v", d)
	}
	if d, err := pl.AllowTier("k", tiers[0], 1); allowed(t, "the log", d, err) {
		t.Fatalf("under a log of 3 an hour, 10 owed: allowed %+v", d)
	}
	if err := pl.RefundTier("k", tiers[0], 3); err != nil {
		t.Fatal(err)
	}
	if d := pl.Peek("k"); d.Remaining != 0 {
		t.Fatalf("back under PerHour(10) after a refund of 3 to a log owing 10: %+v, want nothing left", d)
	}
}

// CarryLogToShorterLog checks that a log carried into a log of a shorter
// window owes its whole cost there, N a window: a log of 10 per 10s
// moved into one of 2 per 1s once kept the 10 on its newest admission,
// which left the short window after 1s: 20 admitted in a second where the
// larger N and the faster rate allow 12, and one denied request of the
// short tier a second sustained 10 a second (600 in a minute).
func CarryLogToShorterLog(t *testing.T, open OpenCarry) {
	short := keyrate.Policy{Name: "short", Limits: []keyrate.Limit{keyrate.Limit{Rate: 2, Per: time.Second}.Using(keyrate.SlidingLog)}}
	pl, clk, tiers := openCarry(t, open, keyrate.Limit{Rate: 10, Per: 10 * time.Second}.Using(keyrate.SlidingLog), short)
	admitted := 0
	spend := func(tier *keyrate.Tier, cost int) {
		t.Helper()
		var d keyrate.Decision
		var err error
		if tier == nil {
			d, err = pl.AllowN("k", cost)
		} else {
			d, err = pl.AllowTier("k", *tier, cost)
		}
		if allowed(t, "a request", d, err) {
			admitted += cost
		}
	}
	spend(nil, 10)
	spend(&tiers[0], 2)
	clk.Advance(time.Second)
	spend(&tiers[0], 2)
	spend(nil, 8)
	if admitted > 12 {
		t.Fatalf("%d admitted in 1s by a key moved between logs of 10 per 10s and 2 per 1s; 10 + 2 allow 12", admitted)
	}
	for range 59 {
		clk.Advance(time.Second)
		spend(&tiers[0], 1)
		spend(nil, 10)
	}
	if most := 10 + 2*60; admitted > most {
		t.Fatalf("%d admitted in 60s by a key moved between logs of 10 per 10s and 2 per 1s every second; 10 + 2 a second allow %d", admitted, most)
	}
}

// CarryWindowsByLength checks that a change of policy matches windows by
// length, not position: a window the new policy drops owes its debt in
// the windows it keeps, and a policy's windows reordered carry exactly.
// Matched by position, PerHour(100)'s debt was forgotten when a key moved
// to a policy of PerSecond(10) alone and back, or was given to the
// per-second window when SetPolicy swapped the two windows: once the
// per-second window had refilled, 100 more were admitted in the hour.
func CarryWindowsByLength(t *testing.T, open OpenCarry) {
	both := []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(100)}
	// spend spends 10 a second for n seconds and returns the cost admitted.
	spend := func(t *testing.T, pl keyrate.PolicyLimiter, clk *clock.Manual, n int) int {
		t.Helper()
		admitted := 0
		for range n {
			if d, err := pl.AllowN("k", 10); allowed(t, "10 a second", d, err) {
				admitted += 10
			}
			clk.Advance(time.Second)
		}
		return admitted
	}
	// check fails unless the key, having spent 100 of PerHour(100) in
	// 10s, gets nothing more in the next 20s (the hour refills 5/9 of a
	// token).
	check := func(t *testing.T, pl keyrate.PolicyLimiter, clk *clock.Manual, move func()) {
		t.Helper()
		if got := spend(t, pl, clk, 10); got != 100 {
			t.Fatalf("10 a second for 10s under PerSecond(10) and PerHour(100): %d admitted, want 100", got)
		}
		move()
		if got := spend(t, pl, clk, 20); got > 0 {
			t.Fatalf("%d more admitted in the 20s after spending 100 of PerHour(100) and a change of policy; the hour refills under 1", got)
		}
	}
	t.Run("dropped", func(t *testing.T) {
		fast := keyrate.Policy{Name: "fast", Limits: both[:1]}
		pl, clk, tiers := openCarry(t, open, keyrate.PerSecond(10), keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: both}, fast)
		check(t, pl, clk, func() {
			if d, err := pl.AllowTier("k", tiers[1], 1); allowed(t, "the per-second policy", d, err) {
				t.Fatalf("under PerSecond(10) alone, 100 owed to PerHour(100): allowed %+v", d)
			}
		})
	})
	t.Run("reordered", func(t *testing.T) {
		pl, clk, _ := openCarry(t, open, keyrate.PerSecond(10), keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: both})
		check(t, pl, clk, func() {
			if err := pl.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{both[1], both[0]}}); err != nil {
				t.Fatal(err)
			}
		})
	})
}
