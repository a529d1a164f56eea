package atomicbucket_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// TestHotRebuildFrozen: a rebuild of a hot key's segment (the table
// grows, or is tidied of dead slots) moves the key to a new slot, and a
// give-back never writes the old, moved one; so the rebuild gives the
// shards of the segment's hot keys back first, and with the clock stopped
// the key admits exactly its Burst across it, as a plain key does (985 of
// 1000 when the rebuild left the batches in the shards, lost). Several
// rebuilds in a row, each with batches out, lose nothing either.
func TestHotRebuildFrozen(t *testing.T) {
	const burst = 1000
	for _, c := range []struct {
		rebuilds int
		more     []string // other hot keys: more than 4 are looked up in a map
	}{{1, nil}, {5, nil}, {1, []string{"a", "b", "c", "d", "e"}}} {
		rebuilds := c.rebuilds
		t.Run(fmt.Sprintf("rebuilds=%d/hot=%d", rebuilds, 1+len(c.more)), func(t *testing.T) {
			s, err := atomicbucket.New(keyrate.PerSecond(1_000_000).WithBurst(burst),
				keyrate.WithClock(clock.NewManual(time.Hour)), atomicbucket.WithHotShards(16, time.Hour),
				atomicbucket.WithHotKeys(append([]string{"hot"}, c.more...)...))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			n := 0
			for range rebuilds {
				for range 2 { // the second call takes a batch, when the word holds one
					if !s.Allow("hot") {
						t.Fatal("a call was denied")
					}
					n++
				}
				atomicbucket.RebuildSegmentOf(s, "hot")
			}
			for ; n <= 2*burst && s.Allow("hot"); n++ {
			}
			if n != burst {
				t.Fatalf("with the clock stopped the hot key admitted %d across %d rebuilds of its segment, want %d", n, rebuilds, burst)
			}
		})
	}
}
