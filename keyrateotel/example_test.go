package keyrateotel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateotel"
)

// A store reports its decisions to a Metrics, which reports them to a
// MeterProvider; here the SDK's with an in-memory reader, in a service
// one with an exporter (OTLP, Prometheus). A collection's points come
// in no set order.
func Example() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	m, err := keyrateotel.New("api", keyrateotel.WithMeterProvider(provider))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	store, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithObserver(m))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if err := m.Watch(store); err != nil {
		panic(err)
	}

	for range 3 {
		store.Allow("alice")
	}
	store.Allow("bob")

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, inst := range rm.ScopeMetrics[0].Metrics {
		if inst.Name != "keyrate.decisions" && inst.Name != "keyrate.key.count" {
			continue
		}
		for _, p := range inst.Data.(metricdata.Sum[int64]).DataPoints {
			fmt.Printf("%s{%s} %d %s\n", inst.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value, inst.Unit)
		}
	}
	// Unordered output:
	// keyrate.decisions{keyrate.decision=allowed,keyrate.policy.name=default,keyrate.store.name=api} 3 {decision}
	// keyrate.decisions{keyrate.decision=denied,keyrate.policy.name=default,keyrate.store.name=api} 1 {decision}
	// keyrate.key.count{keyrate.store.name=api} 2 {key}
}
