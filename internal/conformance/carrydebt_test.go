package conformance_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/conformance"
)

// TestCarryDebt runs the checks of carrydebt.go, issue 31's over-admissions
// through a change of policy, on every in-process store (a log's on the
// stores that keep one).
func TestCarryDebt(t *testing.T) {
	checks := []struct {
		name  string
		check func(*testing.T, conformance.OpenCarry)
	}{
		{"WindowAhead", conformance.CarryWindowAhead},
		{"IntoLog", conformance.CarryIntoLog},
		{"LogToShorterLog", conformance.CarryLogToShorterLog},
		{"RefundOverN", conformance.CarryRefundOverN},
		{"WindowsByLength", conformance.CarryWindowsByLength},
		{"PeekTier", conformance.PeekTier},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range stores {
				t.Run("store="+s.name, func(t *testing.T) { c.check(t, conformance.NewOpenCarry(s.new)) })
			}
		})
	}
}
