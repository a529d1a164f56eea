package keyrateprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyrate/keyrate/keyrateprom"
)

// This file checks the documented answers to misuse that concern a
// registry: two Metrics of one name in one, an empty name, and a store
// name that is no valid label value. Watch of a typed nil or of nil, a
// Metrics not made by New and events a store never sends are the
// exporters' suite's (TestConformance).

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
