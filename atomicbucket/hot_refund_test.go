package atomicbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
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
