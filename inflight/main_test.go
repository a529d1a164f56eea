package inflight_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
)

// TestMain fails the package's tests if a goroutine is left running: an
// Acquire left asleep.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
