package keyrateprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate/internal/eventmetrics"
	"github.com/keyrate/keyrate/internal/eventmetrics/exportertest"
	"github.com/keyrate/keyrate/keyrateprom"
)

// TestConformance runs the exporters' suite: the same events counted as
// keyrateotel counts them, under the same bounds. Each collection is a
// scrape of a pedantic registry.
func TestConformance(t *testing.T) {
	exportertest.Run(t, exportertest.Exporter{
		New: func(t *testing.T) exportertest.Subject {
			return subject(t, keyrateprom.New(exportertest.StoreName))
		},
		Zero: func(t *testing.T) map[string]exportertest.Subject {
			return map[string]exportertest.Subject{"zero": subject(t, &keyrateprom.Metrics{}), "nil": subject(t, nil)}
		},
	})
}

// subject registers m with a new pedantic registry (a Metrics not made by
// New is an unchecked collector that collects nothing) and returns it as
// the suite drives it.
func subject(t *testing.T, m *keyrateprom.Metrics) exportertest.Subject {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return exportertest.Subject{
		Observer: m,
		Watch:    func(s eventmetrics.Stater) error { return m.Watch(s) },
		Collect:  func() exportertest.Snapshot { return snapshot(t, reg) },
	}
}

// names are the suite's names of the metrics.
var names = map[string]string{
	"keyrate_decisions_total":     exportertest.Decisions,
	"keyrate_shadow_denied_total": exportertest.ShadowDenied,
	"keyrate_cost_allowed_total":  exportertest.CostAllowed,
	"keyrate_errors_total":        exportertest.Errors,
	"keyrate_degraded_total":      exportertest.Degraded,
	"keyrate_keys":                exportertest.Keys,
	"keyrate_evictions_total":     exportertest.Evictions,
	"keyrate_refused_total":       exportertest.Refused,
}

// snapshot scrapes reg and returns its series in the suite's terms,
// checking that each has the label store="api".
func snapshot(t *testing.T, reg *prometheus.Registry) exportertest.Snapshot {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := exportertest.Snapshot{}
	for _, mf := range mfs {
		name, ok := names[mf.GetName()]
		require.True(t, ok, "unknown metric %s", mf.GetName())
		for _, m := range mf.GetMetric() {
			s := exportertest.Series{Name: name}
			for _, lp := range m.GetLabel() {
				switch v := lp.GetValue(); lp.GetName() {
				case "store":
					require.Equal(t, exportertest.StoreName, v)
				case "policy":
					s.Policy = v
				case "decision":
					s.Decision = v
				case "error":
					s.Error = v
				default:
					t.Fatalf("unknown label %s on %s", lp.GetName(), mf.GetName())
				}
			}
			if g := m.GetGauge(); g != nil {
				out[s] = g.GetValue()
			} else {
				out[s] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
