package keyrateotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateotel"
)

// TestInstruments: every instrument, once it has points, has its name,
// unit, description and kind: cumulative monotonic sums but for the key
// count, which can go down.
func TestInstruments(t *testing.T) {
	m, r := newMetrics(t, "api")
	require.NoError(t, m.Watch(&stats{Keys: 1}))
	for _, e := range []keyrate.Event{
		{Policy: "free", Cost: 1, Allowed: true},
		{Policy: "free", Cost: 1, Shadow: true},
		{Policy: "free", Cost: 1, Degraded: true, Allowed: true},
		{Policy: "free", Cost: 1, Err: keyrate.ErrStoreFull},
	} {
		m.Observe(e)
	}
	want := map[string]struct {
		unit      string
		monotonic bool
	}{
		"keyrate.decisions":          {"{decision}", true},
		"keyrate.shadow.denials":     {"{decision}", true},
		"keyrate.cost.allowed":       {"{token}", true},
		"keyrate.errors":             {"{error}", true},
		"keyrate.degraded.decisions": {"{decision}", true},
		"keyrate.key.count":          {"{key}", false},
		"keyrate.key.evicted":        {"{key}", true},
		"keyrate.key.refused":        {"{key}", true},
	}
	got := collect(t, r)
	require.Len(t, got, len(want))
	for name, w := range want {
		inst, ok := got[name]
		require.True(t, ok, "no instrument %s", name)
		require.Equal(t, w.unit, inst.Unit, name)
		require.NotEmpty(t, inst.Description, name)
		sum, ok := inst.Data.(metricdata.Sum[int64])
		require.True(t, ok, "%s is a %T, want an int64 sum", name, inst.Data)
		require.Equal(t, w.monotonic, sum.IsMonotonic, name)
		require.Equal(t, metricdata.CumulativeTemporality, sum.Temporality, name)
	}
}

// TestDeltaTemporality: the counts are reported as totals, and a reader
// that asks for deltas gets the increase since its last collection.
func TestDeltaTemporality(t *testing.T) {
	r := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality {
		return metricdata.DeltaTemporality
	}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	m, err := keyrateotel.New("api", keyrateotel.WithMeterProvider(mp))
	require.NoError(t, err)
	const allowed = "keyrate.decisions{keyrate.decision=allowed,keyrate.policy.name=free,keyrate.store.name=api}"
	for i, n := range []int{2, 3} {
		for range n {
			m.Observe(keyrateEvent("free", true))
		}
		require.Equal(t, int64(n), points(t, r)[allowed], "collection %d", i)
	}
}

// TestClose: after Close the provider reads nothing of m, and a second
// Close, or an Observe after it, is harmless.
func TestClose(t *testing.T) {
	m, r := newMetrics(t, "api")
	require.NoError(t, m.Watch(&stats{Keys: 3}))
	m.Observe(keyrateEvent("free", true))
	require.Equal(t, int64(3), points(t, r)["keyrate.key.count{keyrate.store.name=api}"])
	require.Len(t, points(t, r), 3+13)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	m.Observe(keyrateEvent("free", true))
	require.Empty(t, points(t, r))
}
