package atomicbucket_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestHotRefundCapped: a refund fills a key up to its Burst and no
// further (keyrate.PolicyLimiter.Refund), hot or not. With the clock
// stopped, two calls (the second takes a batch of 15 into a shard) and a
// refund of the whole burst leave the key full: exactly Burst more calls
// are admitted, as by the plain store. A refund that moves the word back
// over the charge of a batch still in its shard lets the key admit the
// batch's tokens on top of a full word.
func TestHotRefundCapped(t *testing.T) {
	const burst = 1000
	l := keyrate.PerSecond(1_000_000).WithBurst(burst) // a batch of 15, cover 15
	for _, hot := range []bool{false, true} {
		opts := []keyrate.Option{keyrate.WithClock(clock.NewManual(3600e9)),
			atomicbucket.WithHotShards(16, 0)}
		if hot {
			opts = append(opts, atomicbucket.WithHotKeys("hot"))
		}
		s, err := atomicbucket.New(l, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Allow("hot") || !s.Allow("hot") {
			t.Fatal("a first call was denied")
		}
		if err := s.Refund("hot", burst); err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; n <= 2*burst && s.Allow("hot"); n++ {
		}
		if n != burst {
			t.Errorf("hot=%v: after a refund of the whole burst the key admitted %d with the clock stopped, want %d", hot, n, burst)
		}
		s.Close()
	}
}

// TestHotRefundRace: goroutines released together on a hot key with the
// clock stopped, each refunding every third token it was admitted while
// the others take batches, end with admitted − refunded exactly Burst, at
// every GOMAXPROCS: the refund's hold on the shards (hotshard.Key.Hold)
// gives every batch back exactly and lets calls meanwhile spend from the
// word, and two holds never wait on each other for good.
func TestHotRefundRace(t *testing.T) {
	for _, p := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			const burst = 1000
			s, _ := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(burst), 16, 0)
			var net atomic.Int64
			conformance.Together(8, func(g int) {
				for i := range 400 {
					if !s.Allow("hot") {
						continue
					}
					net.Add(1)
					if (g+i)%3 == 0 {
						if err := s.Refund("hot", 1); err != nil {
							t.Error(err)
							return
						}
						net.Add(-1)
					}
				}
			})
			for s.Allow("hot") {
				net.Add(1)
			}
			if got := net.Load(); got != burst {
				t.Fatalf("admitted less refunded = %d with the clock stopped, want exactly %d", got, burst)
			}
		})
	}
}
