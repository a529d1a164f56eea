package keyrateotel_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keyrate/keyrate/internal/eventmetrics"
	"github.com/keyrate/keyrate/internal/eventmetrics/exportertest"
	"github.com/keyrate/keyrate/keyrateotel"
)

// TestConformance runs the exporters' suite: the same events counted as
// keyrateprom counts them, under the same bounds. Each collection is one
// of the SDK's in-memory reader.
func TestConformance(t *testing.T) {
	exportertest.Run(t, exportertest.Exporter{
		New: func(t *testing.T) exportertest.Subject {
			m, r := newMetrics(t, exportertest.StoreName)
			return exportertest.Subject{
				Observer: m,
				Watch:    func(s eventmetrics.Stater) error { return m.Watch(s) },
				Collect:  func() exportertest.Snapshot { return snapshot(t, r) },
			}
		},
		Zero: func(*testing.T) map[string]exportertest.Subject {
			out := map[string]exportertest.Subject{}
			for name, m := range map[string]*keyrateotel.Metrics{"zero": {}, "nil": nil} {
				out[name] = exportertest.Subject{Observer: m, Watch: func(s eventmetrics.Stater) error { return m.Watch(s) }}
			}
			return out
		},
	})
}

// names are the suite's names of the instruments.
var names = map[string]string{
	"keyrate.decisions":          exportertest.Decisions,
	"keyrate.shadow.denials":     exportertest.ShadowDenied,
	"keyrate.cost.allowed":       exportertest.CostAllowed,
	"keyrate.errors":             exportertest.Errors,
	"keyrate.degraded.decisions": exportertest.Degraded,
	"keyrate.key.count":          exportertest.Keys,
	"keyrate.key.evicted":        exportertest.Evictions,
	"keyrate.key.refused":        exportertest.Refused,
}

// snapshot collects r and returns its points in the suite's terms,
// checking that each has keyrate.store.name="api".
func snapshot(t *testing.T, r *sdkmetric.ManualReader) exportertest.Snapshot {
	t.Helper()
	out := exportertest.Snapshot{}
	for name, inst := range collect(t, r) {
		n, ok := names[name]
		require.True(t, ok, "unknown instrument %s", name)
		for _, p := range inst.Data.(metricdata.Sum[int64]).DataPoints {
			s := exportertest.Series{Name: n}
			for _, kv := range p.Attributes.ToSlice() {
				switch v := kv.Value.AsString(); kv.Key {
				case keyrateotel.StoreKey:
					require.Equal(t, exportertest.StoreName, v)
				case keyrateotel.PolicyKey:
					s.Policy = v
				case keyrateotel.DecisionKey:
					s.Decision = v
				case keyrateotel.ErrorKey:
					s.Error = v
				default:
					t.Fatalf("unknown attribute %s on %s", kv.Key, name)
				}
			}
			out[s] = float64(p.Value)
		}
	}
	return out
}
