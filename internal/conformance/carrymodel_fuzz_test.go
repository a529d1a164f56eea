package conformance_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
)

// openCarryInProcess is conformance.OpenCarryModel for the in-process
// stores: each of them (atomicbucket only when the setup has no logs,
// which it refuses), with its windows aligned to its creation.
func openCarryInProcess(t *testing.T, setup conformance.CarrySetup) []conformance.CarryStore {
	var out []conformance.CarryStore
	for _, s := range stores {
		if setup.Logs && s.name == "atomic" {
			continue
		}
		origin := setup.Clock.Now()
		l, err := s.new(setup.Policies[0].Limits[0], keyrate.WithClock(setup.Clock),
			keyrate.WithPolicies(setup.Policies...), keyrate.WithPolicyFunc(setup.PolicyOf))
		if err != nil {
			t.Fatalf("%s: New with %v: %v", s.name, setup.Policies, err)
		}
		b := l.(keyrate.BoundedLimiter)
		t.Cleanup(func() { b.Close() })
		out = append(out, conformance.CarryStore{
			Name:               s.name,
			Members:            []keyrate.WaitLimiter{l.(keyrate.WaitLimiter)},
			Origin:             origin,
			WindowReservations: true,
			Sweep:              func() { b.Sweep() },
		})
	}
	return out
}

// FuzzCarryModel is conformance.CarryModel on every in-process store:
// random sequences of spends, tiers, moves, refunds, reservations and
// cancels, SetPolicy and sweeps on a manual clock, each store checked
// against an exact model of docs/design/carry.md and against the others.
func FuzzCarryModel(f *testing.F) {
	for _, s := range conformance.CarrySeeds() {
		f.Add(s.Input)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conformance.CarryModel(t, data, openCarryInProcess)
	})
}
