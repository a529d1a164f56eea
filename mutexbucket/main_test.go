package mutexbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/internal/racetest"
)

// TestMain fails the package's tests if any goroutine is left running at
// the end: a background sweeper or a paced sweep that Close did not stop.
// Under the race detector the benchmarks run briefly (racetest.BenchTime).
func TestMain(m *testing.M) {
	racetest.SetBenchTime()
	leaktest.VerifyTestMain(m)
}
