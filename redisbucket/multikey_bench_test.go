package redisbucket_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/redisbucket"
)

// BenchmarkRedisAllowAll compares, in one run on one server and one
// client, a request of a user and its organisation decided by
// Store.AllowAll (op=allowall-2-onecall: one script call) and by
// keyrate.AllowAll (op=allowall-2-twostep: a check and two spends, three
// calls), beside AllowTier of the user alone (op=allowtier), at 1 and 8
// client goroutines per -cpu, each on its own user, the organisation
// shared, its keys under one hash tag. Every call is allowed.
func BenchmarkRedisAllowAll(b *testing.B) {
	racetest.Bench()
	srv := server(b)
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			pols := []keyrate.Policy{
				{Name: "user", Limits: []keyrate.Limit{keyrate.PerSecond(1_000_000).WithBurst(1 << 40)}},
				{Name: "org", Limits: []keyrate.Limit{keyrate.PerSecond(1_000_000).WithBurst(1 << 40)}},
			}
			s := mustNew(b, newClient(b, srv.Addr()), keyrate.PerHour(100), keyrate.WithPolicies(pols...),
				redisbucket.WithPrefix(uniquePrefix(b)+"{t}:"), redisbucket.WithTimeout(slowTimeout))
			user, _ := s.Tier("user")
			org, _ := s.Tier("org")
			for _, op := range []string{"allowtier", "allowall-2-onecall", "allowall-2-twostep"} {
				b.Run("op="+op, func(b *testing.B) {
					b.SetParallelism(g)
					b.ReportAllocs()
					var id atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						u := fmt.Sprint("user:", id.Add(1))
						ks := []keyrate.KeyCost{{Key: u, Tier: user, Cost: 1}, {Key: "org", Tier: org, Cost: 1}}
						for pb.Next() {
							var d keyrate.Decision
							var err error
							switch op {
							case "allowtier":
								d, err = s.AllowTier(u, user, 1)
							case "allowall-2-onecall":
								var m keyrate.MultiDecision
								m, err = s.AllowAll(ks)
								d = m.Decision
							default:
								var m keyrate.MultiDecision
								m, err = keyrate.AllowAll(s, ks)
								d = m.Decision
							}
							if err != nil || !d.Allowed {
								b.Errorf("%s: %+v, %v", op, d, err)
								return
							}
						}
					})
				})
			}
		})
	}
}
