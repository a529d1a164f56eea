package keyrateprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

// counterOf gathers reg and returns the value of the series of metric
// name with the given labels, as a collector that testutil.ToFloat64
// reads; it fails the test if there is no such series.
func counterOf(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"},
				func() float64 { return m.GetCounter().GetValue() })
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return nil
}

type stats keyrate.Stats

func (s *stats) Stats() keyrate.Stats { return keyrate.Stats(*s) }

// TestTwoStoresOneRegistry: Metrics of differently named stores share a
// registry.
func TestTwoStoresOneRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(keyrateprom.New("a")))
	require.NoError(t, reg.Register(keyrateprom.New("b")))
	require.Error(t, reg.Register(keyrateprom.New("a")), "the same store name twice collides")
}
