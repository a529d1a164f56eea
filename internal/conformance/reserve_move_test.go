package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestReservationAcrossMoveBounded pins the documented exception of
// keyrate.PolicyLimiter: a reservation pending when its key moves to a
// faster policy keeps its slot, while the new policy counts its tokens as
// spent at the carry and refills them before the slot, so at the slot the
// key is admitted up to the reservation's cost more than either policy's
// burst, and no more. Found by FuzzPolicyBound (testdata
// f0950618eb990bd4: a reservation of 6 under 1 per 400ms, the key moved
// through a fixed window and back).
func TestReservationAcrossMoveBounded(t *testing.T) {
	slow := keyrate.Limit{Rate: 1, Per: time.Second, Burst: 6}
	fast := keyrate.Policy{Name: "fast", Limits: []keyrate.Limit{{Rate: 100, Per: time.Second, Burst: 6}}}
	for _, s := range stores {
		t.Run("store="+s.name, func(t *testing.T) {
			clk := clock.NewManual(time.Hour)
			l, err := s.new(slow, keyrate.WithClock(clk), keyrate.WithPolicies(fast))
			if err != nil {
				t.Fatal(err)
			}
			defer l.(keyrate.BoundedLimiter).Close()
			wl := l.(keyrate.WaitLimiter)
			tier, err := wl.Tier("fast")
			if err != nil {
				t.Fatal(err)
			}
			if d, err := wl.AllowN("k", 6); err != nil || !d.Allowed {
				t.Fatalf("AllowN(k, 6) = %+v, %v", d, err)
			}
			r, err := wl.Reserve("k", 6, time.Minute)
			if err != nil || !r.OK() || r.Delay() != 6*time.Second {
				t.Fatalf("Reserve(k, 6, 1m) = OK %v, delay %v, %v; want a slot 6s on", r.OK(), r.Delay(), err)
			}
			// The move: the fast policy owes the 12 tokens from now.
			if d, err := wl.AllowTier("k", tier, 1); err != nil || d.Allowed {
				t.Fatalf("AllowTier(k, fast, 1) at once = %+v, %v; want denied, the 12 tokens owed", d, err)
			}
			clk.Advance(r.Delay())
			admitted := 6 // the reservation's, at its slot
			for range 20 {
				if d, err := wl.AllowTier("k", tier, 1); err != nil {
					t.Fatal(err)
				} else if d.Allowed {
					admitted++
				}
			}
			if bound := 6 + r.Cost(); admitted > bound {
				t.Errorf("%d admitted at the slot, above the burst of 6 plus the reservation's %d", admitted, r.Cost())
			}
		})
	}
}
