package striped_test

import (
	"fmt"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/striped"
)

// bounded is the store under the cross-store checks.
var bounded = conformance.InProcess("striped", striped.New)

func TestConformance(t *testing.T) { conformance.Run(t, bounded.Store()) }

// TestConformanceHashed runs the whole suite with keyrate.WithHashedKeys.
func TestConformanceHashed(t *testing.T) {
	conformance.Run(t, bounded.Store(keyrate.WithHashedKeys()))
}

func TestEviction(t *testing.T) { conformance.RunEviction(t, bounded) }

func TestPolicies(t *testing.T) { conformance.RunPolicies(t, bounded) }

func TestWait(t *testing.T) { conformance.RunWait(t, bounded) }

func TestAlgorithms(t *testing.T) { conformance.RunAlgorithms(t, bounded) }

func TestObserver(t *testing.T) { conformance.RunObserver(t, bounded) }

// TestFullStoreStripes runs the full-store checks with few and with many
// stripes: a refused new key searches the stripes after its own, so with
// more stripes than keys (one key a stripe, its own empty) the room it
// finds must come from the others.
func TestFullStoreStripes(t *testing.T) {
	for _, n := range []int{1, 64, 1024} {
		t.Run(fmt.Sprint("stripes=", n), func(t *testing.T) {
			conformance.RunFullStore(t, bounded.With(striped.WithStripes(n)))
		})
	}
}

// BenchmarkSweep: Allow latency on a 1M-key store with and without a
// concurrent sweep. See conformance.BenchSweep.
func BenchmarkSweep(b *testing.B) { conformance.BenchSweep(b, bounded) }

// BenchmarkKeyMemory: bytes per key with and without hashed keys. See
// conformance.BenchKeyMemory.
func BenchmarkKeyMemory(b *testing.B) { conformance.BenchKeyMemory(b, bounded) }

// TestEvictionOneStripe runs the eviction checks with every key on one
// stripe, where every insertion's sample sees every other key.
func TestEvictionOneStripe(t *testing.T) {
	conformance.RunEviction(t, bounded.With(striped.WithStripes(1)))
}
