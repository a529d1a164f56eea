package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// TestDenialDescribesOneWindow: a denial by several windows describes one
// window whole: Window, Limit, Remaining and WindowResetAfter are the
// window's with the fewest tokens, which denied. Window 0 (10 a second)
// holds 3 and window 1 (8 an hour) holds 1; a request of 4 is denied by
// both, and described as window 1. (Review7's bug 2: Window, Limit and
// WindowResetAfter were the first denier's, window 0's, and Remaining the
// least over all windows, window 1's, so httplimit's RateLimit header named
// window 0's quota with window 1's count.)
func TestDenialDescribesOneWindow(t *testing.T) {
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
			if d.Window != 1 || d.Limit != (keyrate.Limit{Rate: 8, Per: time.Hour, Burst: 8}) || d.Remaining != 1 || d.WindowResetAfter != 52*time.Minute+30*time.Second {
				t.Fatalf("denial = Window %d (%v), Remaining %d, WindowResetAfter %v; want window 1 whole (8 per 1h, 1 left, full in 52m30s)",
					d.Window, d.Limit, d.Remaining, d.WindowResetAfter)
			}
		})
	}
}
