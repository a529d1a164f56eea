// Package exportertest is the behaviour suite keyrate's metrics exporters
// (keyrateprom and keyrateotel) must pass, so that they count the same
// events alike under the same bounds. Each exporter's tests call Run with
// a Subject maker and a function that reads what the exporter exports in
// the suite's terms (a Snapshot); what only one exporter has (a
// registry, a MeterProvider, units) its own tests check.
package exportertest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/eventmetrics"
)

// StoreName is the name every Subject's Metrics is made with: an
// exporter's Snapshot checks that each series carries it, and leaves it
// out of the Series.
const StoreName = "api"

// The metrics, as a Series names them, whatever the exporter calls them.
const (
	Decisions    = "decisions"     // by policy and decision
	ShadowDenied = "shadow_denied" // by policy
	CostAllowed  = "cost_allowed"  // by policy
	Errors       = "errors"        // by policy and error
	Degraded     = "degraded"      // by policy and decision
	Keys         = "keys"          // of the watched store
	Evictions    = "evictions"     // of the watched store
	Refused      = "refused"       // of the watched store
)

// Series is one series (Prometheus) or point (OpenTelemetry) that an
// exporter exports: the metric's name, as above, and its policy, decision
// and error labels, "" where it has none.
type Series struct {
	Name, Policy, Decision, Error string
}

func (s Series) String() string {
	var labels []string
	for _, l := range [][2]string{{"policy", s.Policy}, {"decision", s.Decision}, {"error", s.Error}} {
		if l[1] != "" {
			labels = append(labels, fmt.Sprintf("%s=%q", l[0], l[1]))
		}
	}
	return s.Name + "{" + strings.Join(labels, ",") + "}"
}

// Snapshot is what an exporter exports at one instant: every series and
// its value.
type Snapshot map[Series]float64

// Subject is one exporter's Metrics under test.
type Subject struct {
	// Observer is the Metrics.
	keyrate.Observer
	// Watch calls the Metrics' Watch.
	Watch func(eventmetrics.Stater) error
	// Collect reads what the Metrics exports now (a scrape, a
	// collection). It is nil for a Metrics not made by New where the
	// exporter cannot be asked.
	Collect func() Snapshot
}

// Exporter describes an exporter under test.
type Exporter struct {
	// New returns a new Metrics made by the exporter's New(StoreName),
	// whatever it needs released when t ends.
	New func(t *testing.T) Subject
	// Zero returns, by name, Metrics not made by New (the zero value,
	// nil): they must neither panic nor count.
	Zero func(t *testing.T) map[string]Subject
}

// Run runs the whole suite against e.
func Run(t *testing.T, e Exporter) {
	t.Run("Counts", func(t *testing.T) { testCounts(t, e) })
	t.Run("OddEvents", func(t *testing.T) { testOddEvents(t, e) })
	t.Run("StoreSequence", func(t *testing.T) { testStoreSequence(t, e) })
	t.Run("PolicyBounded", func(t *testing.T) { testPolicyBounded(t, e) })
	t.Run("UnknownNamesCannotCrowdOut", func(t *testing.T) { testUnknownNamesCannotCrowdOut(t, e) })
	t.Run("PolicyLength", func(t *testing.T) { testPolicyLength(t, e) })
	t.Run("PolicyNotUTF8", func(t *testing.T) { testPolicyNotUTF8(t, e) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, e) })
	t.Run("WatchSwitch", func(t *testing.T) { testWatchSwitch(t, e) })
	t.Run("WatchStores", func(t *testing.T) { testWatchStores(t, e) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, e) })
	t.Run("Allocs", func(t *testing.T) { testAllocs(t, e) })
	t.Run("Zero", func(t *testing.T) { testZero(t, e) })
}

// policySeries returns the series a Metrics exports for each of policies
// once it has seen them, all 0: both exporters export every series of a
// policy seen, so that a rate over one starts from 0.
func policySeries(policies ...string) Snapshot {
	s := Snapshot{}
	for _, p := range policies {
		for _, d := range []string{"allowed", "denied"} {
			s[Series{Name: Decisions, Policy: p, Decision: d}] = 0
			s[Series{Name: Degraded, Policy: p, Decision: d}] = 0
		}
		s[Series{Name: ShadowDenied, Policy: p}] = 0
		s[Series{Name: CostAllowed, Policy: p}] = 0
		for k := range eventmetrics.NumErrorKinds {
			s[Series{Name: Errors, Policy: p, Error: k.String()}] = 0
		}
	}
	return s
}

// watched returns the series of a watched store.
func watched(keys, evictions, refused float64) Snapshot {
	return Snapshot{{Name: Keys}: keys, {Name: Evictions}: evictions, {Name: Refused}: refused}
}

// with returns s with the series of more set, s changed.
func with(s Snapshot, more Snapshot) Snapshot {
	maps.Copy(s, more)
	return s
}

// equal fails t, naming each series that differs, unless got is want.
func equal(t *testing.T, got, want Snapshot, msg string) {
	t.Helper()
	all := map[Series]bool{}
	for s := range want {
		all[s] = true
	}
	for s := range got {
		all[s] = true
	}
	var diff []string
	for _, s := range slices.SortedFunc(maps.Keys(all), func(a, b Series) int { return strings.Compare(a.String(), b.String()) }) {
		g, gok := got[s]
		w, wok := want[s]
		switch {
		case !gok:
			diff = append(diff, fmt.Sprintf("  missing %v (want %v)", s, w))
		case !wok:
			diff = append(diff, fmt.Sprintf("  extra %v = %v", s, g))
		case g != w:
			diff = append(diff, fmt.Sprintf("  %v = %v, want %v", s, g, w))
		}
	}
	if len(diff) > 0 {
		t.Errorf("%s: %d series differ:\n%s", msg, len(diff), strings.Join(diff, "\n"))
	}
}

// policies returns the policy label values of s.
func policies(s Snapshot) map[string]bool {
	out := map[string]bool{}
	for series := range s {
		if series.Name == Decisions {
			out[series.Policy] = true
		}
	}
	return out
}

type stats keyrate.Stats

func (s *stats) Stats() keyrate.Stats { return keyrate.Stats(*s) }

// keyTierStore returns an atomicbucket store of limit (and opts), that
// tells m of its decisions, whose WithPolicyFunc takes each key's policy
// from the key itself, the part before its first ':': a client that
// chooses its key chooses the policy names Observe gets. The store is
// closed when t ends.
func keyTierStore(t *testing.T, m Subject, limit keyrate.Limit, opts ...keyrate.Option) *atomicbucket.Store {
	t.Helper()
	store, err := atomicbucket.New(limit, append(opts, keyrate.WithObserver(m.Observer),
		keyrate.WithPolicyFunc(func(key string) string {
			tier, _, _ := strings.Cut(key, ":")
			return tier
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
