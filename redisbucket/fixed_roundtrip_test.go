package redisbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// openFixedCarry is conformance.OpenFixedCarry on a real server, its time
// source a manual clock at a whole second of Unix time (windows are
// aligned to the Unix epoch).
func openFixedCarry(t *testing.T, bucket keyrate.Limit, fixed keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
	srv := server(t)
	clk := clock.NewManual(unixStart)
	s := mustNew(t, newClient(t, srv.Addr()), bucket, keyrate.WithPolicies(fixed),
		redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	return s, clk
}

// TestFixedWindowRoundTripMintsNothing is conformance.FixedWindowRoundTrip
// on a real server (the script's wcarry once handed back the window's N at
// each round trip: 15 admitted in 10ms against a burst of 6).
func TestFixedWindowRoundTripMintsNothing(t *testing.T) {
	conformance.FixedWindowRoundTrip(t, openFixedCarry)
}

// TestFixedWindowCarryOwesPreviousWindow is conformance.FixedWindowCarry
// on a real server (the script's fixed window kept no previous count: 9
// admitted in 1ms, and in 3ms, against a burst of 6).
func TestFixedWindowCarryOwesPreviousWindow(t *testing.T) {
	conformance.FixedWindowCarry(t, openFixedCarry)
}
