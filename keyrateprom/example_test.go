package keyrateprom_test

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateprom"
)

// A store reports its decisions to a Metrics, which a registry scrapes.
func Example() {
	m := keyrateprom.New("api")
	store, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithObserver(m))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	if err := m.Watch(store); err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	for range 3 {
		store.Allow("alice")
	}
	store.Allow("bob")

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_decisions_total Rate-limit decisions, by policy and decision (allowed or denied).
# TYPE keyrate_decisions_total counter
keyrate_decisions_total{decision="allowed",policy="default",store="api"} 3
keyrate_decisions_total{decision="denied",policy="default",store="api"} 1
# HELP keyrate_keys Keys the store tracks now.
# TYPE keyrate_keys gauge
keyrate_keys{store="api"} 2
`), "keyrate_decisions_total", "keyrate_keys")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("3 allowed, 1 denied, 2 keys")
	// Output: 3 allowed, 1 denied, 2 keys
}
