package striped_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is left running at
// the end: a background sweeper or a paced sweep that Close did not stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
