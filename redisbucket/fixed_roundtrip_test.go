package redisbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestFixedWindowRoundTripMintsNothing is the root conformance test of
// that name on a real server: a key hopping between a token bucket and a
// fixed window within one window gains nothing (the script's wcarry once
// handed back the window's N at each round trip: 15 admitted in 10ms
// against a burst of 6).
func TestFixedWindowRoundTripMintsNothing(t *testing.T) {
	srv := server(t)
	bucket := keyrate.Limit{Rate: 1, Per: 200 * time.Millisecond, Burst: 6}
	fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: 500 * time.Millisecond}.Using(keyrate.FixedWindow)}}
	clk := clock.NewManual(unixStart) // a whole second: a window starts here
	s := mustNew(t, newClient(t, srv.Addr()), bucket, keyrate.WithPolicies(fixed),
		redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	tier, err := s.Tier("fixed")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(99 * time.Millisecond)
	if d, err := s.AllowN("k", 5); err != nil || !d.Allowed {
		t.Fatalf("the first 5 of a burst of 6: %+v, %v", d, err)
	}
	admitted := 5
	for range 10 {
		clk.Advance(time.Millisecond)
		if d, err := s.AllowTier("k", tier, 1); err == nil && d.Allowed {
			admitted++
		}
		if d, err := s.AllowN("k", 1); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted > bucket.Burst {
		t.Errorf("%d admitted in 10ms by hopping between a token bucket and a fixed window; a burst of %d allows %d", admitted, bucket.Burst, bucket.Burst)
	}
}
