package conformance_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/conformance"
)

// TestMultiKey runs keyrate.AllowAll's checks (multikey.go) on every
// in-process store.
func TestMultiKey(t *testing.T) {
	for _, s := range stores {
		t.Run("store="+s.name, func(t *testing.T) {
			open := conformance.NewOpenCarry(s.new)
			conformance.RunMultiKey(t, conformance.MultiKey{Open: open})
			t.Run("ZeroAllocs", func(t *testing.T) { conformance.MultiKeyZeroAllocs(t, open) })
			t.Run("Undo", func(t *testing.T) { conformance.RunMultiKeyUndo(t, open) })
			t.Run("RetryLongest", func(t *testing.T) { conformance.MultiKeyRetryLongest(t, conformance.MultiKey{Open: open}) })
		})
	}
}
