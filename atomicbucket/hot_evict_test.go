package atomicbucket_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestHotEvictedRecreated: a hot key swept while its shards hold batches
// (expired by then: a batch's charge keeps the key from being full until
// after its end) and used again gets a new bucket, full, and no batch of
// the old one serves it: goroutines released together on it with the
// clock stopped (and then calls one by one) admit exactly Burst, at every GOMAXPROCS, for Sweep and
// for an eviction by a full store (keyrate.WithMaxKeys).
func TestHotEvictedRecreated(t *testing.T) {
	const burst = 1000
	for _, p := range []int{1, 2, 4, 8} {
		for _, how := range []string{"sweep", "maxkeys"} {
			t.Run(fmt.Sprintf("procs=%d/%s", p, how), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
				clk := clock.NewManual(time.Hour)
				s, err := atomicbucket.New(keyrate.PerSecond(1_000_000).WithBurst(burst), // a batch of 15, cover 15
					keyrate.WithClock(clk), keyrate.WithMaxKeys(1), keyrate.WithEvictionGrace(0),
					atomicbucket.WithHotKeys("hot"), atomicbucket.WithHotShards(16, 0))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				hammer := func(calls int) int64 {
					var admitted atomic.Int64
					conformance.Together(8, func(_ int) {
						for range calls {
							if s.Allow("hot") {
								admitted.Add(1)
							}
						}
					})
					return admitted.Load()
				}
				hammer(20) // shards hold batches now, the word the rest
				if s.Peek("hot").Remaining >= burst-8*15 {
					t.Fatal("no batch was taken")
				}
				clk.Advance(time.Second) // every batch expired, the key full
				switch how {
				case "sweep":
					if n := s.Sweep(); n != 1 {
						t.Fatalf("Sweep removed %d keys, want 1", n)
					}
				case "maxkeys":
					if !s.Allow("other") { // evicts the full hot key
						t.Fatal("a new key was refused by a store holding a full one")
					}
					if s.Len() != 1 {
						t.Fatalf("the store holds %d keys, want 1", s.Len())
					}
					clk.Advance(time.Millisecond) // other full: the hot key evicts it in turn
				}
				got := hammer(200)
				for got <= burst && s.Allow("hot") { // what the shards still hold
					got++
				}
				if got != burst {
					t.Fatalf("the key used again after its eviction admitted %d with the clock stopped, want its Burst %d", got, burst)
				}
			})
		}
	}
}
