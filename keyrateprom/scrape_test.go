package keyrateprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

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
// passes promlint (names, units, help, counter suffixes), with the odd
// policy labels too (empty, or a name that was not UTF-8).
func TestLint(t *testing.T) {
	m := keyrateprom.New("api")
	s := stats{Keys: 1, Evictions: 2, Refused: 3}
	require.NoError(t, m.Watch(&s))
	for _, e := range []keyrate.Event{
		{Policy: "free", Cost: 1, Allowed: true},
		{Policy: "free", Cost: 1, Shadow: true},
		{Policy: "free", Cost: 1, Degraded: true, Allowed: true},
		{Policy: "free", Cost: 1, Err: keyrate.ErrStoreFull},
		{}, // an empty policy label
		{Policy: "\xff", Cost: 1, Allowed: true},
	} {
		m.Observe(e)
	}
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, 3, testutil.CollectAndCount(m, "keyrate_keys", "keyrate_evictions_total", "keyrate_refused_total"))
}
