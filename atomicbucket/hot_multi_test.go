package atomicbucket_test

import (
	"testing"
	"time"

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

// TestHotAllowAllZeroAllocs: keyrate.AllowAll over a known hot key and a
// known plain key (given back, then decided in turn) and over two plain
// keys of a store with hot keys (decided in the store) allocates nothing,
// nor does AllowTier on a hot key under a tier.
func TestHotAllowAllZeroAllocs(t *testing.T) {
	s, clk := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(1_000_000), 4, 0)
	tier, err := s.Tier(keyrate.DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hot", "plain", "other"} {
		s.Allow(k)
	}
	withHot := []keyrate.KeyCost{{Key: "hot", Cost: 1}, {Key: "plain", Cost: 1}}
	plain := []keyrate.KeyCost{{Key: "other", Cost: 1}, {Key: "plain", Cost: 1}}
	allocs := testing.AllocsPerRun(1000, func() {
		clk.Advance(time.Microsecond)
		if md, err := keyrate.AllowAll(s, withHot); err != nil || !md.Allowed {
			t.Fatalf("AllowAll(%v) = %+v, %v", withHot, md, err)
		}
		if md, err := keyrate.AllowAll(s, plain); err != nil || !md.Allowed {
			t.Fatalf("AllowAll(%v) = %+v, %v", plain, md, err)
		}
		if d, err := s.AllowTier("hot", tier, 2); err != nil || !d.Allowed {
			t.Fatalf("AllowTier = %+v, %v", d, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AllowAll and AllowTier with a hot key: %v allocations per run, want 0", allocs)
	}
}
