package keyrateprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

// TestObserveCounts feeds one event of each kind and scrapes a real
// registry: every event lands in its own series and nowhere else.
func TestObserveCounts(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))

	for _, e := range []keyrate.Event{
		{Key: "a", Policy: "free", Cost: 1, Allowed: true},
		{Key: "a", Policy: "free", Cost: 3, Allowed: true},
		{Key: "a", Policy: "free", Cost: 1},
		{Key: "b", Policy: "pro", Cost: 1, Shadow: true},
		{Key: "c", Policy: "pro", Cost: 2, Allowed: true, Degraded: true},
		{Key: "c", Policy: "pro", Cost: 1, Degraded: true},
		{Key: "d", Policy: "free", Cost: 1, Err: fmt.Errorf("wrapped: %w", keyrate.ErrStoreFull)},
		{Key: "d", Policy: "gold", Cost: 1, Err: keyrate.ErrUnknownPolicy},
		{Key: "d", Policy: "free", Cost: 0, Err: keyrate.ErrInvalidCost},
		{Key: "d", Policy: "free", Cost: 99, Err: keyrate.ErrCostExceedsBurst},
		{Key: "", Policy: "free", Cost: 1, Err: keyrate.ErrInvalidKey},
		{Key: "e", Policy: "free", Cost: 1, Err: errors.New("dial tcp: connection refused")},
		{Key: "f", Policy: "free", Cost: 1, Degraded: true, Err: errors.New("redisbucket: redis unavailable")},
	} {
		m.Observe(e)
	}

	const want = `
# HELP keyrate_cost_allowed_total Cost (tokens) allowed, by policy.
# TYPE keyrate_cost_allowed_total counter
keyrate_cost_allowed_total{policy="free",store="api"} 4
keyrate_cost_allowed_total{policy="gold",store="api"} 0
keyrate_cost_allowed_total{policy="pro",store="api"} 2
# HELP keyrate_decisions_total Rate-limit decisions, by policy and decision (allowed or denied).
# TYPE keyrate_decisions_total counter
keyrate_decisions_total{decision="allowed",policy="free",store="api"} 2
keyrate_decisions_total{decision="allowed",policy="gold",store="api"} 0
keyrate_decisions_total{decision="allowed",policy="pro",store="api"} 1
keyrate_decisions_total{decision="denied",policy="free",store="api"} 1
keyrate_decisions_total{decision="denied",policy="gold",store="api"} 0
keyrate_decisions_total{decision="denied",policy="pro",store="api"} 2
# HELP keyrate_shadow_denied_total Denials that shadow mode let through, by policy.
# TYPE keyrate_shadow_denied_total counter
keyrate_shadow_denied_total{policy="free",store="api"} 0
keyrate_shadow_denied_total{policy="gold",store="api"} 0
keyrate_shadow_denied_total{policy="pro",store="api"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"keyrate_decisions_total", "keyrate_cost_allowed_total", "keyrate_shadow_denied_total"))

	errs := func(policy, kind string) float64 {
		return testutil.ToFloat64(counterOf(t, reg, "keyrate_errors_total", map[string]string{"policy": policy, "error": kind}))
	}
	require.Equal(t, 1.0, errs("free", "store_full"))
	require.Equal(t, 1.0, errs("gold", "unknown_policy"))
	require.Equal(t, 2.0, errs("free", "invalid_cost"))
	require.Equal(t, 1.0, errs("free", "invalid_key"))
	require.Equal(t, 2.0, errs("free", "backend"))
	require.Equal(t, 0.0, errs("pro", "backend"))

	degraded := func(decision string) float64 {
		return testutil.ToFloat64(counterOf(t, reg, "keyrate_degraded_total", map[string]string{"policy": "pro", "decision": decision}))
	}
	require.Equal(t, 1.0, degraded("allowed"))
	require.Equal(t, 1.0, degraded("denied"))
	require.Equal(t, 1.0, testutil.ToFloat64(counterOf(t, reg, "keyrate_degraded_total",
		map[string]string{"policy": "free", "decision": "denied"})), "a FailClosed answer: degraded, and an error")
}

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

// TestPolicyLabelBounded: a client that names its own tiers cannot grow
// the registry past MaxUnknownPolicies policy label values for names the
// store lacks, nor past MaxPolicies with the names it has.
func TestPolicyLabelBounded(t *testing.T) {
	m := keyrateprom.New("")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	for i := range keyrateprom.MaxPolicies + 100 {
		m.Observe(keyrate.Event{Policy: fmt.Sprint("tier-", i), Cost: 1, Err: keyrate.ErrUnknownPolicy})
	}
	require.Equal(t, (keyrateprom.MaxUnknownPolicies+1)*2, testutil.CollectAndCount(m, "keyrate_decisions_total"))
	require.Equal(t, float64(keyrateprom.MaxPolicies+100-keyrateprom.MaxUnknownPolicies), testutil.ToFloat64(counterOf(t, reg, "keyrate_errors_total",
		map[string]string{"policy": keyrateprom.Other, "error": "unknown_policy"})))
	for i := range keyrateprom.MaxPolicies {
		m.Observe(keyrate.Event{Policy: fmt.Sprint("known-", i), Cost: 1, Allowed: true})
	}
	require.Equal(t, (keyrateprom.MaxPolicies+1)*2, testutil.CollectAndCount(m, "keyrate_decisions_total"),
		"names the store has take the rest of MaxPolicies")
	require.Equal(t, float64(keyrateprom.MaxUnknownPolicies), testutil.ToFloat64(counterOf(t, reg, "keyrate_decisions_total",
		map[string]string{"policy": keyrateprom.Other, "decision": "allowed"})), "and no more")
}

type stats keyrate.Stats

func (s *stats) Stats() keyrate.Stats { return keyrate.Stats(*s) }

// watchedSeries is what a scrape of a Metrics named "api" that watches a
// store shows: keys tracked, evictions and refusals.
func watchedSeries(keys, evictions, refused int) string {
	return fmt.Sprintf(`
# HELP keyrate_evictions_total Buckets the store evicted because they were full.
# TYPE keyrate_evictions_total counter
keyrate_evictions_total{store="api"} %d
# HELP keyrate_keys Keys the store tracks now.
# TYPE keyrate_keys gauge
keyrate_keys{store="api"} %d
# HELP keyrate_refused_total New keys the store refused because it tracked its maximum.
# TYPE keyrate_refused_total counter
keyrate_refused_total{store="api"} %d
`, evictions, keys, refused)
}

// TestWatch: the store's Stats are read at each scrape, its counts from
// the Watch call on, and a typed nil is refused rather than left to panic
// at the scrape.
func TestWatch(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.Equal(t, 0, testutil.CollectAndCount(m, "keyrate_keys"), "no store watched")
	names := []string{"keyrate_keys", "keyrate_evictions_total", "keyrate_refused_total"}

	s := &stats{Keys: 7, Evictions: 3, Refused: 2}
	require.NoError(t, m.Watch(s))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(watchedSeries(7, 0, 0)), names...),
		"what the store did before it was watched is not counted")
	s.Keys, s.Evictions, s.Refused = 9, 8, 3
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(watchedSeries(9, 5, 1)), names...))

	var typedNil *stats
	require.Error(t, m.Watch(typedNil))
	require.Equal(t, 1, testutil.CollectAndCount(m, "keyrate_keys"), "a refused Watch changes nothing")
	require.NoError(t, m.Watch(nil))
	require.Equal(t, 0, testutil.CollectAndCount(m, "keyrate_keys"))
}

// TestObserveAllocs: once a policy has been seen, counting allocates
// nothing.
func TestObserveAllocs(t *testing.T) {
	m := keyrateprom.New("api")
	e := keyrate.Event{Key: "k", Policy: "free", Cost: 1, Allowed: true}
	m.Observe(e)
	require.Zero(t, testing.AllocsPerRun(1000, func() { m.Observe(e) }))
}

// TestTwoStoresOneRegistry: Metrics of differently named stores share a
// registry.
func TestTwoStoresOneRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(keyrateprom.New("a")))
	require.NoError(t, reg.Register(keyrateprom.New("b")))
	require.Error(t, reg.Register(keyrateprom.New("a")), "the same store name twice collides")
}

// TestObserveErrorKinds: a failure policy's denial that comes with an
// error (redisbucket's FailClosed) is a degraded decision too, and a
// caller's context ending (a Wait cancelled before it began, a Redis call
// the caller gave up on) is not a backend failure, nor is a call the
// policy's algorithm does not support.
func TestObserveErrorKinds(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	for _, e := range []keyrate.Event{
		{Key: "a", Policy: "free", Cost: 1, Degraded: true, Err: errors.New("redisbucket: redis unavailable")},
		{Key: "a", Policy: "free", Cost: 1, Err: fmt.Errorf("redisbucket: %w", context.Canceled)},
		{Key: "a", Policy: "free", Cost: 1, Err: context.DeadlineExceeded},
		{Key: "a", Policy: "free", Cost: 1, Err: fmt.Errorf("%w: policy %q counts with %v", keyrate.ErrUnsupportedAlgorithm, "free", keyrate.SlidingLog)},
	} {
		m.Observe(e)
	}
	get := func(name string, labels map[string]string) float64 {
		return testutil.ToFloat64(counterOf(t, reg, name, labels))
	}
	require.Equal(t, 1.0, get("keyrate_degraded_total", map[string]string{"policy": "free", "decision": "denied"}),
		"FailClosed's degraded denial")
	require.Equal(t, 1.0, get("keyrate_errors_total", map[string]string{"policy": "free", "error": "backend"}),
		"only the Redis failure is a backend error")
	require.Equal(t, 2.0, get("keyrate_errors_total", map[string]string{"policy": "free", "error": "canceled"}),
		"the caller's context ending")
	require.Equal(t, 1.0, get("keyrate_errors_total", map[string]string{"policy": "free", "error": "unsupported"}),
		"a Reserve under an algorithm that cannot reserve is the caller's mistake, not the backend's")
}
