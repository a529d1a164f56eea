package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// openFixedCarry is conformance.OpenFixedCarry for the in-process store
// newStore.
func openFixedCarry(newStore func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)) conformance.OpenFixedCarry {
	return func(t *testing.T, bucket keyrate.Limit, fixed keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
		clk := clock.NewManual(time.Hour) // the epoch: a window starts here
		l, err := newStore(bucket, keyrate.WithClock(clk), keyrate.WithPolicies(fixed))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.(keyrate.BoundedLimiter).Close() })
		return l.(keyrate.PolicyLimiter), clk
	}
}

// TestFixedWindowRoundTripMintsNothing is conformance.FixedWindowRoundTrip
// on every in-process store.
func TestFixedWindowRoundTripMintsNothing(t *testing.T) {
	for _, s := range stores {
		t.Run("store="+s.name, func(t *testing.T) { conformance.FixedWindowRoundTrip(t, openFixedCarry(s.new)) })
	}
}

// TestFixedWindowCarryOwesPreviousWindow is conformance.FixedWindowCarry
// on every in-process store.
func TestFixedWindowCarryOwesPreviousWindow(t *testing.T) {
	for _, s := range stores {
		t.Run("store="+s.name, func(t *testing.T) { conformance.FixedWindowCarry(t, openFixedCarry(s.new)) })
	}
}
