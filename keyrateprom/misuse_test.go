package keyrateprom_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateprom"
)

// This file checks the documented answers to misuse: Watch of a typed nil,
// Watch(nil), two Metrics of one name in a registry, an empty name, a
// store name that is no valid label value, and events a store never sends.

// Watch: "A typed nil ... is refused with an error and changes nothing"; "a
// nil s stops watching"; keyrate_keys and the other two "exist only for a
// Metrics that watches one"; "A later Watch replaces the store watched".
func TestMisuseWatch(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	a, err := atomicbucket.New(keyrate.PerSecond(1))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := atomicbucket.New(keyrate.PerSecond(1))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Allow("x")
	b.Allow("x")
	b.Allow("y")
	keys := func() (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "keyrate_keys" {
				return mf.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if _, ok := keys(); ok {
		t.Error("keyrate_keys exported by a Metrics that watches nothing")
	}
	if err := m.Watch(a); err != nil {
		t.Fatal(err)
	}
	var nilStore *atomicbucket.Store
	if err := m.Watch(nilStore); err == nil {
		t.Error("Watch(typed nil) = nil, want an error")
	}
	if n, ok := keys(); !ok || n != 1 {
		t.Errorf("after Watch(a) and a refused Watch(typed nil): keyrate_keys = %v (present %v), want a's 1", n, ok)
	}
	if err := m.Watch(b); err != nil {
		t.Fatal(err)
	}
	if n, _ := keys(); n != 2 {
		t.Errorf("after Watch(b): keyrate_keys = %v, want b's 2", n)
	}
	if err := m.Watch(nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys(); ok {
		t.Error("keyrate_keys still exported after Watch(nil)")
	}
}

// New: "An empty name is allowed (the label is then empty), and so are
// several Metrics in one registry as long as their names differ" — and two
// of one name are refused by the registry, not merged or panicking.
func TestMisuseNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(keyrateprom.New("")); err != nil {
		t.Errorf("Register(New(\"\")) = %v", err)
	}
	if err := reg.Register(keyrateprom.New("api")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(keyrateprom.New("api")); err == nil {
		t.Error("a second Metrics named api registered beside the first")
	}
	// A store name that is not valid UTF-8 is no label value: the registry
	// refuses it with an error, and nothing panics.
	if err := prometheus.NewRegistry().Register(keyrateprom.New("\xff")); err == nil {
		t.Error("Register(New(\"\\xff\")) = nil, want the registry's error")
	}
}

// Events no store sends — an empty policy, a negative cost, an allowed
// event carrying an error — are counted without a panic and without an
// invalid series: an error wins over Allowed, and a cost below 1 adds
// nothing to keyrate_cost_allowed_total.
func TestMisuseOddEvents(t *testing.T) {
	m := keyrateprom.New("api")
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	m.Observe(keyrate.Event{})
	m.Observe(keyrate.Event{Policy: "p", Cost: -5, Allowed: true})
	m.Observe(keyrate.Event{Policy: "p", Cost: 1, Allowed: true, Err: errors.New("boom")})
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_cost_allowed_total Cost (tokens) allowed, by policy.
# TYPE keyrate_cost_allowed_total counter
keyrate_cost_allowed_total{policy="",store="api"} 0
keyrate_cost_allowed_total{policy="p",store="api"} 0
# HELP keyrate_decisions_total Rate-limit decisions, by policy and decision (allowed or denied).
# TYPE keyrate_decisions_total counter
keyrate_decisions_total{decision="allowed",policy="",store="api"} 0
keyrate_decisions_total{decision="allowed",policy="p",store="api"} 1
keyrate_decisions_total{decision="denied",policy="",store="api"} 1
keyrate_decisions_total{decision="denied",policy="p",store="api"} 0
`), "keyrate_cost_allowed_total", "keyrate_decisions_total")
	if err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(errorsOf(t, reg, "p", "backend")); n != 1 {
		t.Errorf("keyrate_errors_total{policy=p,error=backend} = %v, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v, %v", problems, err)
	}
}

// errorsOf returns keyrate_errors_total{policy, error} from reg as a
// collector testutil.ToFloat64 reads.
func errorsOf(t *testing.T, reg *prometheus.Registry, policy, kind string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "keyrate_errors_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mt.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["policy"] == policy && labels["error"] == kind {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
				c.Add(mt.GetCounter().GetValue())
				return c
			}
		}
	}
	t.Fatalf("no keyrate_errors_total{policy=%q,error=%q}", policy, kind)
	return nil
}
