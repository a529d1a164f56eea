package keyrateotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateotel"
)

// This file checks the documented answers to misuse: a nil or typed-nil
// provider, a nil Option, a name that is not UTF-8, a provider whose
// meter fails, two Metrics of one name, and a Metrics not made by New.
// Watch of a typed nil or of nil and events a store never sends are the
// exporters' suite's (TestConformance).

// WithMeterProvider: "A nil p keeps the default; a typed nil ... makes New
// fail with keyrate.ErrInvalidOption"; New: "A nil Option changes
// nothing"; "New fails only on a name that is not valid UTF-8".
func TestMisuseOptions(t *testing.T) {
	var typedNil *sdkmetric.MeterProvider
	_, err := keyrateotel.New("api", keyrateotel.WithMeterProvider(typedNil))
	require.ErrorIs(t, err, keyrate.ErrInvalidOption)
	require.ErrorContains(t, err, "keyrateotel.WithMeterProvider: a nil *metric.MeterProvider")

	m, err := keyrateotel.New("api", nil, keyrateotel.WithMeterProvider(nil))
	require.NoError(t, err)
	require.NoError(t, m.Close())

	_, err = keyrateotel.New("\xff")
	require.ErrorContains(t, err, "not valid UTF-8")
}

// TestDefaultProvider: without WithMeterProvider a Metrics records to the
// global provider of the time of New.
func TestDefaultProvider(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	otel.SetMeterProvider(mp)
	m, err := keyrateotel.New("global")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	m.Observe(keyrateEvent("free", false))
	require.Equal(t, map[string]int64{
		"keyrate.decisions{keyrate.decision=denied,keyrate.policy.name=free,keyrate.store.name=global}": 1,
	}, nonzero(points(t, r)))
}

// failingProvider is a MeterProvider whose meter fails to create
// counters.
type failingProvider struct{ noop.MeterProvider }

func (failingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

type failingMeter struct{ noop.Meter }

func (failingMeter) Int64ObservableCounter(string, ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	return noop.Int64ObservableCounter{}, errors.New("no counters here")
}

// New: fails on "an error of the provider's meter", and says so.
func TestMisuseFailingMeter(t *testing.T) {
	m, err := keyrateotel.New("api", keyrateotel.WithMeterProvider(failingProvider{}))
	require.ErrorContains(t, err, "keyrateotel: New: no counters here")
	require.Nil(t, m)
}

// New: "Metrics of different names can share a MeterProvider; two of one
// name record to the same points."
func TestMisuseNames(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	for _, name := range []string{"a", "b", "a", ""} {
		m, err := keyrateotel.New(name, keyrateotel.WithMeterProvider(mp))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		m.Observe(keyrateEvent("free", false))
	}
	require.Equal(t, map[string]int64{
		"keyrate.decisions{keyrate.decision=denied,keyrate.policy.name=free,keyrate.store.name=a}": 2,
		"keyrate.decisions{keyrate.decision=denied,keyrate.policy.name=free,keyrate.store.name=b}": 1,
		"keyrate.decisions{keyrate.decision=denied,keyrate.policy.name=free}":                      1,
	}, nonzero(points(t, r)))
}

// A Metrics not made by New "counts nothing and never panics" (the
// exporters' suite checks Observe and Watch): Close has nothing to close,
// and a store refuses a nil *Metrics as its observer rather than call it.
func TestMisuseZero(t *testing.T) {
	for _, m := range []*keyrateotel.Metrics{{}, nil} {
		require.NoError(t, m.Close())
	}
	var nilMetrics *keyrateotel.Metrics
	_, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithObserver(nilMetrics))
	require.ErrorIs(t, err, keyrate.ErrInvalidOption)
}
