package atomicbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
)

// TestHotAllowAllDeniedSpendsNothing: keyrate.AllowAll denied by a plain
// key spends nothing from a hot key in the request, with nothing running
// beside it. The hot key's word is empty while its shard holds a batch's
// tokens and cover, so its Peek (the word alone, a lower bound) says it
// lacks its cost; deciding in turn then spends it first, from the shard,
// and keeps that spend when the plain key denies: the hot key then admits
// 999 with the clock stopped, not its Burst of 1000.
func TestHotAllowAllDeniedSpendsNothing(t *testing.T) {
	const burst = 1000
	s, _ := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(burst), 16, 0) // a batch of 15, cover 15
	admitted := 0
	if !s.Allow("hot") || !s.Allow("hot") { // the second takes a batch: the word holds 969
		t.Fatal("a first call was denied")
	}
	admitted += 2
	for range 57 { // cost 17 > the batch: spent from the word, 57·17 = 969
		if d, err := s.AllowN("hot", 17); err != nil || !d.Allowed {
			t.Fatalf("AllowN(hot, 17) = %+v, %v", d, err)
		}
		admitted += 17
	}
	if d := s.Peek("hot"); d.Remaining != 0 {
		t.Fatalf("the word holds %d, want 0", d.Remaining)
	}
	if d, err := s.AllowN("plain", burst); err != nil || !d.Allowed {
		t.Fatalf("AllowN(plain, %d) = %+v, %v", burst, d, err)
	}
	for _, keys := range [][]keyrate.KeyCost{
		{{Key: "hot", Cost: 1}, {Key: "plain", Cost: 1}},
		{{Key: "plain", Cost: 1}, {Key: "hot", Cost: 1}},
	} {
		md, err := keyrate.AllowAll(s, keys)
		if err != nil || md.Allowed {
			t.Fatalf("AllowAll(%v) = %+v, %v; want denied by the empty plain key", keys, md, err)
		}
	}
	for ; admitted <= 2*burst && s.Allow("hot"); admitted++ {
	}
	if admitted != burst {
		t.Fatalf("the hot key admitted %d with the clock stopped around two denied AllowAll calls, want %d", admitted, burst)
	}
}
