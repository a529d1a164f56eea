package keyrateotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateotel"
)

// newMetrics returns a Metrics named name recording to a real SDK
// MeterProvider, and the provider's in-memory reader. The Metrics is
// closed and the provider shut down when t ends.
func newMetrics(t testing.TB, name string) (*keyrateotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m, err := keyrateotel.New(name, keyrateotel.WithMeterProvider(mp))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		require.NoError(t, mp.Shutdown(context.Background()))
	})
	return m, r
}

// collect returns the instruments r collects, by name, every one of
// keyrateotel's scope.
func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, keyrateotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// points returns every point r collects, as "name{key=value,...}" (the
// attributes sorted by key) to its value: all of keyrateotel's
// instruments are int64 sums.
func points(t testing.TB, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for name, m := range collect(t, r) {
		sum, ok := m.Data.(metricdata.Sum[int64])
		require.True(t, ok, "%s is a %T, want an int64 sum", name, m.Data)
		for _, p := range sum.DataPoints {
			id := name + "{" + p.Attributes.Encoded(attribute.DefaultEncoder()) + "}"
			_, dup := out[id]
			require.False(t, dup, "two points %s", id)
			out[id] = p.Value
		}
	}
	return out
}

type stats keyrate.Stats

func (s *stats) Stats() keyrate.Stats { return keyrate.Stats(*s) }

// keyrateEvent is an event of cost 1 under policy, allowed or denied.
func keyrateEvent(policy string, allowed bool) keyrate.Event {
	return keyrate.Event{Key: "k", Policy: policy, Cost: 1, Allowed: allowed}
}

// nonzero returns the points of p whose value is not 0: a Metrics reports
// every per-policy point of a policy it has seen, 0 until counted.
func nonzero(p map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for id, v := range p {
		if v != 0 {
			out[id] = v
		}
	}
	return out
}
