package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// Review7's bugs, each a failing test until fixed.

// A key's state carried to a faster token bucket at a reading older than
// its last spend mints tokens (see TestCarryAtStaleReadingMintsNothing):
// the stores now carry at a reading taken after the old state is retired,
// which is no older than the spend for a clock that never steps back, but
// a clock stepped back still mints. A key that spent its burst under a
// slow default, carried to a faster one at a reading a second before that
// spend, spends its burst again at the instant of the first. The package
// documentation: "a clock stepped backwards likewise only denies more
// until it catches up".
func TestBugStaleCarryToFasterRateMintsClockBack(t *testing.T) {
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
			for range 10 {
				if d, _ := l.AllowN("k", 1); d.Allowed {
					admitted++
				}
			}
			if admitted > 0 {
				t.Fatalf("at the instant its burst of 10 was spent the key spent %d more (burst 10)", admitted)
			}
		})
	}
}

// A denial under a policy of several windows reports a Decision whose
// Limit and Remaining describe different windows when more than one window
// denies: Rules.Decide sets Window (and Limit, WindowResetAfter) to the
// first window that denied, but Remaining to the least over all windows.
// keyrate.Decision's documentation says Window is "the window Limit and
// Remaining describe". Here window 0 (10 a second) holds 3 and window 1 (8
// an hour) holds 1; a request of 4 is reported as Window 0, Limit 10 per
// 1s, Remaining 1, WindowResetAfter 700ms. httplimit's RateLimit header
// then names window 0's quota (q=10, w=1) with r=1 and t=1350 (RetryAfter,
// which is right): a count and a wait that belong to window 1, under
// window 0's name. Either window described whole would do; the binding one
// (the longest wait, as Reserve reports it) tells the client most.
func TestBugDenialDescribesOneWindow(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, _ := windowStore(t, i, keyrate.PerSecond(1), keyrate.WithPolicies(keyrate.Policy{Name: "two", Limits: []keyrate.Limit{
				{Rate: 10, Per: time.Second, Burst: 10}, {Rate: 8, Per: time.Hour, Burst: 8}}}))
			tier, _ := l.Tier("two")
			if d, err := l.AllowTier("k", tier, 7); err != nil || !d.Allowed {
				t.Fatalf("first request: %+v, %v", d, err)
			}
			d, err := l.AllowTier("k", tier, 4)
			if err != nil || d.Allowed || d.RetryAfter != 22*time.Minute+30*time.Second {
				t.Fatalf("AllowTier(4) with 3 and 1 left = %+v, %v; want denied, RetryAfter 22m30s", d, err)
			}
			first := d.Window == 0 && d.Remaining == 3 && d.WindowResetAfter == 700*time.Millisecond
			binding := d.Window == 1 && d.Remaining == 1 && d.WindowResetAfter == 52*time.Minute+30*time.Second
			if !first && !binding {
				t.Fatalf("denial = Window %d (%v), Remaining %d, WindowResetAfter %v: not one window's (window 0: 3 left, full in 700ms; window 1: 1 left, full in 52m30s)",
					d.Window, d.Limit, d.Remaining, d.WindowResetAfter)
			}
		})
	}
}
