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

// TestHotTierMovesFrozen: a hot key moved back and forth between two
// tiers of one limit, with the clock stopped, admits exactly its Burst,
// as a plain key does: each move carries the key's debt to a new slot and
// retires the old one, into which its shards' batches can no longer be
// given back, so the move gives them back first. Without that, each move
// loses the tokens and cover the shards hold (834 of 1000 here).
func TestHotTierMovesFrozen(t *testing.T) {
	const burst = 1000
	for _, hot := range []bool{false, true} {
		t.Run(fmt.Sprintf("hot=%v", hot), func(t *testing.T) {
			l := keyrate.PerSecond(1_000_000).WithBurst(burst) // a batch of 15, cover 15
			opts := []keyrate.Option{keyrate.WithClock(clock.NewManual(time.Hour)), atomicbucket.WithHotShards(16, 0),
				keyrate.WithPolicies(keyrate.Policy{Name: "a", Limits: []keyrate.Limit{l}}, keyrate.Policy{Name: "b", Limits: []keyrate.Limit{l}})}
			if hot {
				opts = append(opts, atomicbucket.WithHotKeys("hot"))
			}
			s, err := atomicbucket.New(l, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ta, _ := s.Tier("a")
			tb, _ := s.Tier("b")
			admitted := 0
			for i := 0; i < 4*burst; i++ {
				tier := ta
				if i/10%2 == 1 { // ten calls under each tier in turn: the second takes a batch
					tier = tb
				}
				d, err := s.AllowTier("hot", tier, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != burst {
				t.Fatalf("admitted %d with the clock stopped across tier moves, want %d", admitted, burst)
			}
		})
	}
}

// TestHotSetPolicyFrozen: a hot key whose default policy is replaced
// (SetPolicy, the same limit each time) every ten calls, with the clock
// stopped, admits exactly its Burst: each replacement moves the key at its
// next call, carrying its debt, and its shards' batches are given back
// before the old slot is retired, never into the new one (they would be
// counted twice) and never lost.
func TestHotSetPolicyFrozen(t *testing.T) {
	const burst = 1000
	l := keyrate.PerSecond(1_000_000).WithBurst(burst) // a batch of 15, cover 15
	s, _ := hotStore(t, l, 16, 0)
	admitted := 0
	for i := 0; i < 4*burst; i++ {
		if i%10 == 5 {
			if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{l}}); err != nil {
				t.Fatal(err)
			}
		}
		if s.Allow("hot") {
			admitted++
		}
	}
	if admitted != burst {
		t.Fatalf("admitted %d with the clock stopped across policy replacements, want %d", admitted, burst)
	}
}

// TestHotTierMovesConcurrent: goroutines released together on one hot key,
// each switching between two tiers (one of the same limit, then one of
// half the burst at twice the rate) every twenty calls, with the clock
// stopped, never admit more than the larger Burst, at every GOMAXPROCS:
// a move carries the key's debt, batches charged to the old slot are given
// back before it is retired or lost, never given into the new one, and a
// batch of the old tier serves only calls under it. (Exactly Burst is not
// promised here: a batch taken between a move's drain and its retirement
// is lost; the floor checked, a quarter of the burst, only says the key is
// not starved.)
func TestHotTierMovesConcurrent(t *testing.T) {
	const burst = 1000
	for _, p := range []int{1, 2, 4, 8} {
		for _, bb := range []int{burst, burst / 2} {
			t.Run(fmt.Sprintf("procs=%d/b=%d", p, bb), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
				l := keyrate.PerSecond(1_000_000).WithBurst(burst)
				s, err := atomicbucket.New(l, keyrate.WithClock(clock.NewManual(time.Hour)),
					atomicbucket.WithHotKeys("hot"), atomicbucket.WithHotShards(16, 0),
					keyrate.WithPolicies(keyrate.Policy{Name: "a", Limits: []keyrate.Limit{l}},
						keyrate.Policy{Name: "b", Limits: []keyrate.Limit{keyrate.PerSecond(2_000_000).WithBurst(bb)}}))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ta, _ := s.Tier("a")
				tb, _ := s.Tier("b")
				var admitted atomic.Int64
				conformance.Together(8, func(g int) {
					for i := range 400 {
						tier := ta
						if (i/20+g)%2 == 1 {
							tier = tb
						}
						if d, err := s.AllowTier("hot", tier, 1+i%3); err != nil {
							t.Error(err)
							return
						} else if d.Allowed {
							admitted.Add(int64(1 + i%3))
						}
					}
				})
				for _, tier := range []keyrate.Tier{ta, tb, ta} { // what the shards and the word still hold
					for {
						d, err := s.AllowTier("hot", tier, 1)
						if err != nil {
							t.Fatal(err)
						}
						if !d.Allowed {
							break
						}
						admitted.Add(1)
					}
				}
				if got := admitted.Load(); got > burst || got < burst/4 {
					t.Fatalf("admitted %d with the clock stopped across concurrent tier moves, want at most %d (and, not starved, at least %d)", got, burst, burst/4)
				}
			})
		}
	}
}
