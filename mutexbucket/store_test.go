package mutexbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/mutexbucket"
)

// bounded is the store under the cross-store checks.
var bounded = conformance.InProcess("mutexbucket", mutexbucket.New)

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

// BenchmarkSweep: Allow latency on a 1M-key store with and without a
// concurrent sweep. See conformance.BenchSweep.
func BenchmarkSweep(b *testing.B) { conformance.BenchSweep(b, bounded) }

// BenchmarkKeyMemory: bytes per key with and without hashed keys. See
// conformance.BenchKeyMemory.
func BenchmarkKeyMemory(b *testing.B) { conformance.BenchKeyMemory(b, bounded) }
