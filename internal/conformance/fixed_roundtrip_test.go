package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestFixedWindowRoundTripMintsNothing: a key that hops between a token
// bucket and a fixed window, within one window, gains nothing. Carried
// from a bucket that owes more than N, a fixed window counts N in the
// current window and the rest in the next, ahead, and keeps no count for
// the current one; carried back, it owed only the next window's count,
// so each round trip handed back the current window's N, less what the
// bucket refills by its end. A client that picks its tier (a tier header)
// could hop on every request and pass the bucket's limit as often as it
// liked. FuzzPolicyBound found it (testdata 6fb4ecf63c85305b): 7 admitted
// in 96ms against a burst of 6.
func TestFixedWindowRoundTripMintsNothing(t *testing.T) {
	bucket := keyrate.Limit{Rate: 1, Per: 200 * time.Millisecond, Burst: 6}
	fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: 500 * time.Millisecond}.Using(keyrate.FixedWindow)}}
	for _, s := range stores {
		t.Run("store="+s.name, func(t *testing.T) {
			clk := clock.NewManual(time.Hour) // a window starts here
			l, err := s.new(bucket, keyrate.WithClock(clk), keyrate.WithPolicies(fixed))
			if err != nil {
				t.Fatal(err)
			}
			defer l.(keyrate.BoundedLimiter).Close()
			pl := l.(keyrate.PolicyLimiter)
			tier, err := pl.Tier("fixed")
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(99 * time.Millisecond)
			admitted := 0
			if d, err := pl.AllowN("k", 5); err != nil || !d.Allowed {
				t.Fatalf("the first 5 of a burst of 6: %+v, %v", d, err)
			}
			admitted += 5
			// Ten round trips, 1ms apart: the bucket refills 10·1/200 of a
			// token in all, so at most the 1 token left is admitted.
			for range 10 {
				clk.Advance(time.Millisecond)
				if d, err := pl.AllowTier("k", tier, 1); err == nil && d.Allowed {
					admitted++
				}
				if d, err := pl.AllowN("k", 1); err == nil && d.Allowed {
					admitted++
				}
			}
			if admitted > bucket.Burst {
				t.Errorf("%d admitted in 10ms by hopping between a token bucket and a fixed window; a burst of %d allows %d", admitted, bucket.Burst, bucket.Burst)
			}
		})
	}
}
