package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
)

// slowFast are two tiers of one burst, the second refilling twice as
// fast: 10 a second (a token every 100ms) and 20 a second (every 50ms),
// both with a burst of 10. Neither lets a key spend more than 10 at one
// instant, and no move between them may either: a move carries the
// tokens spent and not yet refilled whole.
var slowFast = []keyrate.Policy{
	{Name: "slow", Limits: []keyrate.Limit{{Rate: 10, Per: time.Second, Burst: 10}}},
	{Name: "fast", Limits: []keyrate.Limit{{Rate: 20, Per: time.Second, Burst: 10}}},
}

// slowFastKey returns a store made by newStore with the slowFast tiers on
// a hook clock at 1h, its key "k" put under "slow" by one request, and the
// two tiers.
func slowFastKey(t *testing.T, newStore func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)) (keyrate.PolicyLimiter, *conformance.HookClock, keyrate.Tier, keyrate.Tier) {
	t.Helper()
	clk := conformance.NewHookClock(time.Hour)
	l, err := newStore(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(slowFast...))
	if err != nil {
		t.Fatal(err)
	}
	ps := l.(keyrate.PolicyLimiter)
	slow, _ := ps.Tier("slow")
	fast, _ := ps.Tier("fast")
	if d, err := ps.AllowTier("k", slow, 1); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	return ps, clk, slow, fast
}

// A key's state carried to a faster token bucket at a stale reading (one
// taken before the state's last spend) would mint tokens: Rule.Carry
// measures the debt from the reading, TAT − t, and converts it at the new
// rate from t, so TAT' = t + (TAT − t)·I'/I, which for I' < I grows with
// t: the older the reading, the earlier the new bucket is full, the spend
// that followed the reading back-dated to it and repaid at the fast rate.
// So every store carries at a reading taken after the key's old state is
// retired (review7's bug 1, fixed).
//
// Here a goroutine reads the clock for a request under "fast" (the key's
// new tier) and is held up for a second (HookClock runs the rest of the
// interleaving right after that reading); meanwhile the key spends its 10
// under "slow". The held-up request then carries the key over at its
// reading, a second before that spend: 20 slow tokens owed from then,
// which at the fast rate are repaid by the instant of the spend. At that
// same instant the key spends 10 more: 20 at one instant, twice the burst
// of either tier. Carried at a fresh reading (or at the reading of the
// spend) the key would owe 10 fast tokens and be denied.
//
// mutexbucket (Map.Take reads t before Replace's Compute loads the bucket)
// and atomicbucket (Store.locked carries under the segment's lock at the
// reading takeOnce took before it); striped reads the clock under its
// stripe's lock, and is held to the same here.
func TestCarryAtStaleReadingMintsNothing(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ps, clk, slow, fast := slowFastKey(t, st.new)
			clk.Advance(time.Hour) // full again
			var spent keyrate.Decision
			hold := func() {
				clk.Advance(time.Second) // the request below is held up a second after its reading
				spent, _ = ps.AllowTier("k", slow, 10)
			}
			if st.name == "striped" { // its hot path reads the clock first, and its slow path again
				clk.AtNextReading(func() { clk.AtNextReading(hold) })
			} else {
				clk.AtNextReading(hold)
			}
			moved, _ := ps.AllowTier("k", fast, 1) // moves the key to "fast", at its (stale) reading
			if !clk.Fired() || !spent.Allowed {
				t.Fatalf("the interleaving did not run as planned (fired %v, the spend of 10 under slow: %+v)", clk.Fired(), spent)
			}
			admitted := 10
			if moved.Allowed { // decided at a later reading, the instant of the spend
				admitted++
			}
			for range 10 {
				if d, err := ps.AllowTier("k", fast, 1); err == nil && d.Allowed {
					admitted++
				}
			}
			if admitted > 10 {
				t.Fatalf("the key spent %d at one instant (10 under slow, %d under fast), above either tier's burst of 10", admitted, admitted-10)
			}
		})
	}
}

// TestRefundCarryAtStaleReadingMintsNothing is
// TestCarryAtStaleReadingMintsNothing for a carry made by a refund: a
// RefundTier of 1 under "fast", held up a second after its reading while
// the key spends its burst under "slow", carries the key over. It may give
// back the 1 token it refunds, and nothing more: carried at its reading it
// found the key full under "fast" at the instant of the spend, and the key
// spent 10 more.
func TestRefundCarryAtStaleReadingMintsNothing(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ps, clk, slow, fast := slowFastKey(t, st.new)
			clk.Advance(time.Hour)
			var spent keyrate.Decision
			clk.AtNextReading(func() {
				clk.Advance(time.Second)
				spent, _ = ps.AllowTier("k", slow, 10)
			})
			if err := ps.RefundTier("k", fast, 1); err != nil {
				t.Fatal(err)
			}
			if !clk.Fired() || !spent.Allowed {
				t.Fatalf("the interleaving did not run as planned (fired %v, the spend of 10 under slow: %+v)", clk.Fired(), spent)
			}
			admitted := 0
			for range 10 {
				if d, err := ps.AllowTier("k", fast, 1); err == nil && d.Allowed {
					admitted++
				}
			}
			if admitted > 1 {
				t.Fatalf("after spending its burst of 10 and a refund of 1 the key spent %d more at the same instant", admitted)
			}
		})
	}
}

// TestClockBackAcrossCarryBounded: the one way time can mint tokens, which
// the package documentation states ("Time never mints tokens"), stays
// within its bound. A key carried to a faster token bucket at a reading
// older than its last spend counts the spent tokens from that reading, and
// the stores take that reading once the old state is retired, so only a
// clock stepped back reaches it. A key that spent its burst of 10 under a
// slow default, carried to a faster one at a reading a second before that
// spend, may spend again at the instant of the first, but at most the new
// Burst, 10.
func TestClockBackAcrossCarryBounded(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, slowFast[0].Limits[0])
			clk.Set(1500 * time.Millisecond)
			if d, _ := l.AllowN("k", 10); !d.Allowed {
				t.Fatal("burst denied")
			}
			if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: slowFast[1].Limits}); err != nil {
				t.Fatal(err)
			}
			clk.Set(500 * time.Millisecond) // stepped back a second
			if d, _ := l.AllowN("k", 1); d.Allowed {
				t.Fatal("allowed at a reading a second before the burst was spent")
			}
			clk.Set(1500 * time.Millisecond) // the instant of the burst again
			admitted := 0
			for range 30 {
				if d, _ := l.AllowN("k", 1); d.Allowed {
					admitted++
				}
			}
			if admitted > 10 {
				t.Fatalf("at the instant its burst of 10 was spent the key spent %d more, above the new Burst of 10", admitted)
			}
		})
	}
}
