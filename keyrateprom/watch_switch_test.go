package keyrateprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate/keyrateprom"
)

// TestWatchSwitchNeverGoesBack: when Watch replaces the store (a
// reloaded configuration builds a new one), keyrate_evictions_total and
// keyrate_refused_total go on from where they were: the old store's
// counts, read once more at the switch, stay in them, the new store's
// add to them from then, and a store watched again is not counted twice.
// Reporting the watched store's own Stats, they went from 10 evictions
// down to 1 at the switch, which Prometheus reads as a counter reset.
func TestWatchSwitchNeverGoesBack(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	names := []string{"keyrate_keys", "keyrate_evictions_total", "keyrate_refused_total"}
	scrape := func(keys, evictions, refused int, msg string) {
		t.Helper()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(watchedSeries(keys, evictions, refused)), names...), msg)
	}

	old := &stats{}
	require.NoError(t, m.Watch(old))
	old.Keys, old.Evictions, old.Refused = 4, 9, 2
	scrape(4, 9, 2, "the first store")
	old.Evictions = 10 // after the last scrape: still counted, at the switch
	fresh := &stats{Keys: 1}
	require.NoError(t, m.Watch(fresh))
	fresh.Evictions = 1
	scrape(1, 11, 2, "the old store's counts carry over; the new one's add to them")

	require.NoError(t, m.Watch(fresh))
	scrape(1, 11, 2, "watching the same store again counts nothing twice")

	require.NoError(t, m.Watch(nil))
	require.Zero(t, testutil.CollectAndCount(m, names...), "no store watched: no series")
	fresh.Evictions, fresh.Refused = 5, 1 // while not watched: not counted
	require.NoError(t, m.Watch(fresh))
	fresh.Evictions = 7
	scrape(1, 13, 2, "a store watched again adds from the new Watch on")
}
