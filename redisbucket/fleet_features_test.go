package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestFleetFeaturesTogether: three stores (a fleet of three processes) on
// one server, each with pipelining (one turn, pipelines of up to 4), a
// deny cache, leases and a breaker, on a frozen clock, hammered by
// goroutines on a few keys with costs of 1 and 2, refunds, and contexts
// that end at random: net of refunds, no key admits more than its
// (lowered) Burst, whatever the features do together; no turn stays
// taken, and no call fails but by its caller giving up.
func TestFleetFeaturesTogether(t *testing.T) {
	srv := server(t)
	const keys, goroutines, calls = 3, 12, 40
	limit := keyrate.PerSecond(10).WithBurst(40) // leases of 1s lower it to 30
	prefix := uniquePrefix(t)
	clk := clock.NewManual(start)
	var stores []*redisbucket.Store
	for range 3 {
		stores = append(stores, mustNew(t, newClient(t, srv.Addr()), limit, redisbucket.WithPrefix(prefix),
			redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clk),
			redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4}),
			redisbucket.WithDenyCache(64),
			redisbucket.WithLeases(redisbucket.Lease{Size: 3, Life: time.Second}),
			redisbucket.WithBreaker(redisbucket.Breaker{Clock: clock.NewManual(0)})))
	}
	burst := int64(stores[0].Limit().Burst)
	if burst != 30 {
		t.Fatalf("the leases' Burst is %d; want 30", burst)
	}
	var net [keys]atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			<-release
			for i := range calls {
				s := stores[(g+i)%len(stores)]
				k := r.IntN(keys)
				key := fmt.Sprint("k", k)
				cost := 1 + r.IntN(2)
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(4) == 0 {
					go cancel()
				}
				d, err := s.AllowNContext(ctx, key, cost)
				cancel()
				switch {
				case err != nil && !errors.Is(err, context.Canceled):
					t.Errorf("AllowN(%q, %d): %+v, %v", key, cost, d, err)
					return
				case err == nil && d.Allowed:
					net[k].Add(int64(cost))
					if r.IntN(5) == 0 { // gives it back
						if err := s.Refund(key, cost); err != nil {
							t.Errorf("Refund(%q, %d): %v", key, cost, err)
							return
						}
						net[k].Add(-int64(cost))
					}
				}
			}
		}()
	}
	close(release)
	wg.Wait()
	for k := range net {
		if got := net[k].Load(); got > burst {
			t.Errorf("key k%d: %d admitted net of refunds, time frozen; want at most the Burst %d", k, got, burst)
		}
	}
	for _, s := range stores {
		if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
			t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
		}
		if st := s.Stats(); st.Errors != 0 || st.BreakerOpens != 0 {
			t.Errorf("Stats %+v: an outage counted where callers only gave up", st)
		}
	}
}
