package conformance

import (
	"testing"

	"github.com/keyrate/keyrate"
)

// testRefundCapsAtBurst: a refund fills a key up to its Burst and no
// further (keyrate.PolicyLimiter.Refund). With the clock stopped, a key
// that spent 3 tokens in 3 calls and is then refunded its whole burst
// admits exactly Burst more, however the store holds the key's tokens (a
// store that hands a hot key's tokens to shards in batches must not
// count a batch still in a shard as tokens the key lacks, or the key
// admits that batch on top of a full bucket).
func testRefundCapsAtBurst(t *testing.T, b Bounded) {
	const burst = 160
	l, _ := openPolicies(t, b, keyrate.PerSecond(100).WithBurst(burst))
	for i := range 3 {
		if !l.Allow("k") {
			t.Fatalf("call %d on a new key was denied", i)
		}
	}
	if err := l.Refund("k", burst); err != nil {
		t.Fatalf("Refund(k, %d): %v", burst, err)
	}
	n := 0
	for ; n <= 2*burst && l.Allow("k"); n++ {
	}
	if n != burst {
		t.Fatalf("after a refund of the whole burst the key admitted %d with the clock stopped, want exactly Burst %d", n, burst)
	}
}
