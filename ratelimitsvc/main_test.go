package ratelimitsvc_test

import (
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine (a server, a client
// connection, a watcher) outlives them.
func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}
