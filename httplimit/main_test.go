package httplimit

import (
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/internal/racetest"
)

// TestMain fails the package's tests if any goroutine (a server, a client
// connection) outlives them, and runs the benchmarks briefly under the race
// detector (racetest.BenchTime).
func TestMain(m *testing.M) {
	racetest.SetBenchTime()
	leaktest.VerifyTestMain(m)
}
