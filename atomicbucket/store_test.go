package atomicbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/racetest"
)

// bounded is the store under the cross-store checks.
var bounded = conformance.InProcess("atomicbucket", atomicbucket.New)

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

// TestWaitHour runs the simulated waiters for the whole hour the issue
// names (3.6 million waits), under the race detector too, where RunWait
// simulates a minute: once, for the lock-free store.
func TestWaitHour(t *testing.T) {
	if !racetest.Enabled {
		t.Skip("TestWait simulated the hour already (it simulates a minute under the race detector)")
	}
	conformance.SimulatedWaiters(t, bounded, time.Hour)
}

// TestCancelRace: a reservation made while Cancel runs (between its load
// and its compare-and-swap) keeps Cancel from giving anything back.
func TestCancelRace(t *testing.T) { conformance.CancelRace(t, bounded) }
