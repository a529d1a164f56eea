package keyrateprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

// TestZeroMetrics: a Metrics not made by New (the zero value, or nil)
// neither panics nor counts: registering one used to end the process,
// for a registry calls Describe on a goroutine of its own, where no
// caller can recover the panic, and each Observe on the request path
// panicked.
func TestZeroMetrics(t *testing.T) {
	for name, m := range map[string]*keyrateprom.Metrics{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(m), "an unchecked collector that collects nothing")
			m.Observe(keyrate.Event{Key: "k", Policy: "free", Cost: 1, Allowed: true})
			mfs, err := reg.Gather()
			require.NoError(t, err)
			require.Empty(t, mfs)
			require.Error(t, m.Watch(nil), "Watch of a Metrics not made by New says so")
		})
	}
}
