package bench

import (
	"testing"

	"github.com/keyrate/keyrate/internal/racetest"
)

// TestMain runs the benchmarks for racetest.BenchTime each under the race
// detector, unless -benchtime is given: there they only show that the
// harness is race-free, and a second for each of the dozens would take
// minutes.
func TestMain(m *testing.M) {
	racetest.SetBenchTime()
	m.Run()
}
