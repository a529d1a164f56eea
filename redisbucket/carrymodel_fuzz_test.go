package redisbucket_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// openCarryRedis returns conformance.OpenCarryModel for stores on the
// server of client, each run under a prefix of its own: one store, or
// with fleet a fleet of two (one per default policy of the setup) that
// share the prefix, as the processes of a rolling deploy whose default
// limit changed do. Windows are aligned to the time source's Unix epoch,
// and reservations work under token buckets only.
func openCarryRedis(client redis.UniversalClient, fleet bool) conformance.OpenCarryModel {
	return func(t *testing.T, setup conformance.CarrySetup) []conformance.CarryStore {
		prefix := uniquePrefix(t)
		defaults := []keyrate.Policy{setup.Policies[0]}
		if fleet {
			defaults = append(defaults, setup.Alt)
		}
		var members []keyrate.WaitLimiter
		for _, def := range defaults {
			policies := append([]keyrate.Policy{def}, setup.Policies[1:]...)
			s := mustNew(t, client, def.Limits[0], keyrate.WithPolicies(policies...), keyrate.WithPolicyFunc(setup.PolicyOf),
				redisbucket.WithTimeSource(setup.Clock), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
			t.Cleanup(func() { s.Close() })
			members = append(members, s)
		}
		return []conformance.CarryStore{{Name: "redis", Members: members}}
	}
}

// FuzzCarryModelRedis is conformance.CarryModel on a real server: the
// scripts' decisions and carries (token buckets, windows and logs)
// against the exact model of docs/design/carry.md.
func FuzzCarryModelRedis(f *testing.F) { fuzzCarryModel(f, false, conformance.CarrySeeds()) }

// FuzzCarryModelFleet is conformance.CarryModel on a fleet of two stores
// on one server and prefix whose default policies differ (a rolling
// deploy of a new default limit): a request through the other store moves
// the key to the other default, and the scripts must carry it as a change
// of policy.
func FuzzCarryModelFleet(f *testing.F) {
	fuzzCarryModel(f, true, append(conformance.CarrySeeds(), conformance.CarryFleetSeeds()...))
}

// fuzzCarryModel runs conformance.CarryModel on a real server, on one
// store or a fleet of two, from seeds.
func fuzzCarryModel(f *testing.F, fleet bool, seeds []conformance.CarrySeed) {
	for _, s := range seeds {
		f.Add(s.Input)
	}
	open := openCarryRedis(newClient(f, server(f).Addr()), fleet)
	f.Fuzz(func(t *testing.T, data []byte) {
		conformance.CarryModel(t, data, open)
	})
}
