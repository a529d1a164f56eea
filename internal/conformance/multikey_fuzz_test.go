package conformance_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/conformance"
)

// FuzzAllowAllModel runs conformance.MultiKeyModel, keyrate.AllowAll and
// its keys checked against an independent model of one token bucket per
// key, on every in-process store.
func FuzzAllowAllModel(f *testing.F) {
	for _, seed := range conformance.MultiKeySeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			return
		}
		for _, s := range stores {
			t.Run(s.name, func(t *testing.T) {
				conformance.MultiKeyModel(t, conformance.MultiKey{Open: conformance.NewOpenCarry(s.new)}, ops)
			})
		}
	})
}
