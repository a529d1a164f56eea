package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateotel"
	"github.com/keyrate/keyrate/keyrateprom"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// BenchmarkObserver measures what keyrate.WithObserver costs, in one run:
// store=<store>/observer=<observer>/wl=<workload>, with no observer (the
// default: a nil check per call), an observer that only counts (one
// atomic add), keyrateprom's, and keyrateotel's recording to the
// OpenTelemetry SDK (a MeterProvider with a reader that is never
// collected: the cost of recording, not of exporting). "keyrate report"
// does not read these rows.
func BenchmarkObserver(b *testing.B) {
	var counted atomic.Int64
	count := keyrate.ObserverFunc(func(keyrate.Event) { counted.Add(1) })
	observers := []struct {
		name string
		opts func() []keyrate.Option
	}{
		{"none", func() []keyrate.Option { return nil }},
		{"count", func() []keyrate.Option { return []keyrate.Option{keyrate.WithObserver(count)} }},
		{"prometheus", func() []keyrate.Option { return []keyrate.Option{keyrate.WithObserver(keyrateprom.New("bench"))} }},
		{"otel", func() []keyrate.Option { return []keyrate.Option{keyrate.WithObserver(otelMetrics(b))} }},
	}
	for _, st := range []struct {
		name string
		new  func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error)
	}{
		{"mutex", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(mutexbucket.New, opts...)
		}},
		{"striped", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(striped.New, opts...)
		}},
		{"atomic", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(atomicbucket.New, opts...)
		}},
	} {
		for _, o := range observers {
			sc := subjectCase{name: st.name + "/observer=" + o.name, limiter: true, new: st.new(o.opts()...)}
			for _, name := range []string{"hotkey", "uniform-1k"} {
				wl := workloadNamed(b, name)
				b.Run("store="+sc.name+"/wl="+wl.name, func(b *testing.B) {
					benchKnown(b, sc, wl)
				})
			}
		}
	}
}

// otelMetrics returns a keyrateotel.Metrics recording to a MeterProvider
// of the OpenTelemetry SDK of its own, with an in-memory reader.
func otelMetrics(b *testing.B) *keyrateotel.Metrics {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, err := keyrateotel.New("bench", keyrateotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkObserve measures an observer's Observe alone, for one event of
// each kind under a policy it has seen: observer=<observer>/event=<kind>,
// keyrateprom's beside keyrateotel's, in one run.
func BenchmarkObserve(b *testing.B) {
	for _, o := range []struct {
		name string
		new  func() keyrate.Observer
	}{
		{"prometheus", func() keyrate.Observer { return keyrateprom.New("bench") }},
		{"otel", func() keyrate.Observer { return otelMetrics(b) }},
	} {
		for _, ev := range []struct {
			name string
			e    keyrate.Event
		}{
			{"allowed", keyrate.Event{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1, Allowed: true}},
			{"denied", keyrate.Event{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1}},
			{"error", keyrate.Event{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1, Err: keyrate.ErrStoreFull}},
		} {
			b.Run("observer="+o.name+"/event="+ev.name, func(b *testing.B) {
				obs, e := o.new(), ev.e
				obs.Observe(e)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						obs.Observe(e)
					}
				})
			})
		}
	}
}

// BenchmarkExport measures one export of an observer that has seen
// eventmetrics' MaxPolicies (64) policies: a Gather of keyrateprom's
// registry beside a Collect of keyrateotel's in-memory reader. Both read
// their counts then, rather than on the request path.
func BenchmarkExport(b *testing.B) {
	seed := func(o keyrate.Observer) {
		for i := range keyrateprom.MaxPolicies {
			o.Observe(keyrate.Event{Key: "k", Policy: fmt.Sprint("policy-", i), Cost: 1, Allowed: true})
		}
	}
	b.Run("observer=prometheus", func(b *testing.B) {
		m := keyrateprom.New("bench")
		seed(m)
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("observer=otel", func(b *testing.B) {
		r := sdkmetric.NewManualReader()
		m, err := keyrateotel.New("bench", keyrateotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))))
		if err != nil {
			b.Fatal(err)
		}
		seed(m)
		var rm metricdata.ResourceMetrics
		b.ReportAllocs()
		for b.Loop() {
			if err := r.Collect(context.Background(), &rm); err != nil {
				b.Fatal(err)
			}
		}
	})
}
