package atomicbucket_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
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
