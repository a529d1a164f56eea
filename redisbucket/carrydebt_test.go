package redisbucket_test

import (
	"errors"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// openCarry is conformance.OpenCarry on a real server, its time source a
// manual clock at a whole hour of Unix time (windows are aligned to the
// Unix epoch).
func openCarry(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
	srv := server(t)
	clk := clock.NewManual(unixStart)
	s, err := redisbucket.New(newClient(t, srv.Addr()), def, keyrate.WithPolicies(policies...),
		redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		return nil, clk
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

// TestCarryDebt runs issue 31's checks of a change of policy
// (internal/conformance's carrydebt.go) on a real server: the scripts
// carry by the rule rules.Rules.Carry does.
func TestCarryDebt(t *testing.T) {
	t.Run("WindowAhead", func(t *testing.T) { conformance.CarryWindowAhead(t, openCarry) })
	t.Run("IntoLog", func(t *testing.T) { conformance.CarryIntoLog(t, openCarry) })
	t.Run("LogToShorterLog", func(t *testing.T) { conformance.CarryLogToShorterLog(t, openCarry) })
	t.Run("RefundOverN", func(t *testing.T) { conformance.CarryRefundOverN(t, openCarry) })
	t.Run("WindowsByLength", func(t *testing.T) { conformance.CarryWindowsByLength(t, openCarry) })
	t.Run("PeekTier", func(t *testing.T) { conformance.PeekTier(t, openCarry) })
}

// TestUnlimitedReservationAt is conformance.UnlimitedReservationAt on a
// real server.
func TestUnlimitedReservationAt(t *testing.T) { conformance.UnlimitedReservationAt(t, openCarry) }

// TestCancelSeveralWindows is conformance.CancelSeveralWindows on a real
// server: the script decides a reservation at its slot in every window,
// and a cancel gives back c·I in each, as in process.
func TestCancelSeveralWindows(t *testing.T) { conformance.CancelSeveralWindows(t, openCarry) }
