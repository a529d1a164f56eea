package keyrate_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine is left running at
// the end: a store's background sweeper that Close did not stop, or a
// waiter an example left asleep.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
