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

// TestFixedWindowCarryOwesPreviousWindow is the root conformance test of
// that name on a real server: a key moved out of a fixed window owes the
// previous window's count too (the script's fixed window kept none: 9
// admitted in 1ms, and in 3ms, against a burst of 6).
func TestFixedWindowCarryOwesPreviousWindow(t *testing.T) {
	srv := server(t)
	bucket := keyrate.Limit{Rate: 1, Per: 100 * time.Millisecond, Burst: 6}
	fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: 500 * time.Millisecond}.Using(keyrate.FixedWindow)}}
	clk := clock.NewManual(unixStart) // a whole second: a window starts here
	s := mustNew(t, newClient(t, srv.Addr()), bucket, keyrate.WithPolicies(fixed),
		redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	tier, err := s.Tier("fixed")
	if err != nil {
		t.Fatal(err)
	}
	spend := func(what string, n int, f func() (keyrate.Decision, error)) int {
		t.Helper()
		got := 0
		for range n {
			if d, err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			} else if d.Allowed {
				got++
			}
		}
		return got
	}

	clk.Advance(499 * time.Millisecond)
	admitted := spend("the fixed window's end", 3, func() (keyrate.Decision, error) { return s.AllowTier("a", tier, 1) })
	clk.Advance(time.Millisecond)
	admitted += spend("the next window's start", 3, func() (keyrate.Decision, error) { return s.AllowTier("a", tier, 1) })
	if admitted != 6 {
		t.Fatalf("a fixed window of 3 admitted %d across its boundary, want 6", admitted)
	}
	admitted += spend("the bucket", 6, func() (keyrate.Decision, error) { return s.AllowN("a", 1) })
	if admitted > bucket.Burst {
		t.Errorf("%d admitted in 1ms: 6 by a fixed window of 3 across its boundary, then %d by a token bucket; a burst of %d allows %d",
			admitted, admitted-6, bucket.Burst, bucket.Burst)
	}

	clk.Advance(498 * time.Millisecond) // 2ms before the next boundary
	admitted = spend("the bucket", 3, func() (keyrate.Decision, error) { return s.AllowN("b", 1) })
	spend("the fixed window", 1, func() (keyrate.Decision, error) { return s.AllowTier("b", tier, 1) })
	clk.Advance(3 * time.Millisecond)
	admitted += spend("the bucket again", 6, func() (keyrate.Decision, error) { return s.AllowN("b", 1) })
	if admitted > bucket.Burst {
		t.Errorf("%d admitted in 3ms by a token bucket with a fixed window's boundary between; a burst of %d allows %d", admitted, bucket.Burst, bucket.Burst)
	}
}
