package httplimit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (a server, a client
// connection) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
