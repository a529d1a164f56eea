package keyrateprom_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/keyrateprom"
)

// series returns every counter and gauge series reg gathers, by metric
// name and label pairs.
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			id := mf.GetName() + seriesLabels(m)
			switch {
			case m.GetCounter() != nil:
				out[id] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[id] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// seriesLabels returns m's labels as {name="value",...}, in the order
// the registry sorts them (by name).
func seriesLabels(m *dto.Metric) string {
	var b strings.Builder
	for i, lp := range m.GetLabel() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", lp.GetName(), lp.GetValue())
	}
	return "{" + b.String() + "}"
}

func labelPairs(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.GetLabel() {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}

// TestConcurrentScrapes: scrapes running while stores' goroutines observe
// (made-up policy names appearing among them, past MaxPolicies) and the
// watched store is swapped never fail, and no counter a scrape sees ever
// goes backwards, nor disappears. At the end the counts add up to what
// was decided. A bounded stress run: iteration counts, no timing.
func TestConcurrentScrapes(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	newStore := func() *atomicbucket.Store {
		s, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: 1 << 40, Burst: 5},
			keyrate.WithClock(clock.NewManual(0)), keyrate.WithObserver(m))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	stores := []*atomicbucket.Store{newStore(), newStore()}
	require.NoError(t, m.Watch(stores[0]))
	// The default policy is seen first, so that it has its own label
	// before the made-up names below take the rest.
	m.Observe(keyrate.Event{Policy: keyrate.DefaultPolicy, Err: keyrate.ErrInvalidKey})

	const (
		workers = 4
		calls   = 2000
	)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for w := range workers {
		wg.Go(func() {
			n := 0
			for i := range calls {
				s := stores[i%2]
				if s.Allow(fmt.Sprint("k", i%50)) {
					n++
				}
				// events of made-up policies: more names than MaxPolicies
				m.Observe(keyrate.Event{Policy: fmt.Sprint("p", (w*calls+i)%(2*keyrateprom.MaxPolicies)), Cost: 1, Err: keyrate.ErrUnknownPolicy})
				if i%100 == 0 {
					if err := m.Watch(stores[(i/100)%2]); err != nil {
						t.Error(err) // not FailNow: this is not the test's goroutine
						return
					}
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	// 30 scrapes while the workers run (how many overlap them is up to
	// the scheduler), then one after every call.
	prev := map[string]float64{}
	scrape := func(i int) {
		cur := series(t, reg)
		for id, v := range prev {
			if strings.HasPrefix(id, "keyrate_keys{") {
				continue // a gauge, of whichever store is watched at the scrape
			}
			got, ok := cur[id]
			require.True(t, ok, "scrape %d: series %s disappeared", i, id)
			require.GreaterOrEqual(t, got, v, "scrape %d: counter %s went backwards", i, id)
		}
		prev = cur
	}
	for i := range 30 {
		scrape(i)
	}
	wg.Wait()
	scrape(30)
	require.Equal(t, float64(allowed), prev[`keyrate_decisions_total{decision="allowed",policy="default",store="api"}`])
	require.Equal(t, float64(workers*calls-allowed), prev[`keyrate_decisions_total{decision="denied",policy="default",store="api"}`])
	var unknown float64
	policies := map[string]bool{}
	for id, v := range prev {
		if strings.HasPrefix(id, "keyrate_errors_total{") && strings.Contains(id, `error="unknown_policy"`) {
			unknown += v
		}
	}
	for _, mf := range must(reg.Gather()) {
		if mf.GetName() == "keyrate_decisions_total" {
			for _, s := range mf.GetMetric() {
				policies[labelPairs(s)["policy"]] = true
			}
		}
	}
	require.Equal(t, float64(workers*calls), unknown, "every made-up policy's event is counted once")
	require.Len(t, policies, keyrateprom.MaxUnknownPolicies+1, "default and made-up names, MaxUnknownPolicies labels in all, and other")
	require.True(t, policies[keyrateprom.Other])
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestReregister: a Metrics unregistered and registered again (or moved to
// another registry) reports the counts it had, not zero: its counters live
// in the Metrics, not in the registry, so a scrape never sees one go
// backwards across a re-registration.
func TestReregister(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	for range 3 {
		m.Observe(keyrate.Event{Policy: "free", Cost: 2, Allowed: true})
	}
	allowed := map[string]string{"policy": "free", "decision": "allowed"}
	require.Equal(t, 3.0, testutil.ToFloat64(counterOf(t, reg, "keyrate_decisions_total", allowed)))
	require.True(t, reg.Unregister(m))
	require.Zero(t, testutil.CollectAndCount(reg), "unregistered: nothing gathered")
	m.Observe(keyrate.Event{Policy: "free", Cost: 2, Allowed: true}) // counted while unregistered
	require.NoError(t, reg.Register(m))
	require.Equal(t, 4.0, testutil.ToFloat64(counterOf(t, reg, "keyrate_decisions_total", allowed)))
	require.Equal(t, 8.0, testutil.ToFloat64(counterOf(t, reg, "keyrate_cost_allowed_total", map[string]string{"policy": "free"})))

	other := prometheus.NewPedanticRegistry()
	require.NoError(t, other.Register(m), "one Metrics may be in two registries")
	require.Equal(t, 4.0, testutil.ToFloat64(counterOf(t, other, "keyrate_decisions_total", allowed)))
}

// TestLint: every metric, each series populated and a store watched,
// passes promlint (names, units, help, counter suffixes).
func TestLint(t *testing.T) {
	m := keyrateprom.New("api")
	s := stats{Keys: 1, Evictions: 2, Refused: 3}
	require.NoError(t, m.Watch(&s))
	for _, e := range []keyrate.Event{
		{Policy: "free", Cost: 1, Allowed: true},
		{Policy: "free", Cost: 1, Shadow: true},
		{Policy: "free", Cost: 1, Degraded: true, Allowed: true},
		{Policy: "free", Cost: 1, Err: keyrate.ErrStoreFull},
	} {
		m.Observe(e)
	}
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, 3, testutil.CollectAndCount(m, "keyrate_keys", "keyrate_evictions_total", "keyrate_refused_total"))
}
