package httplimit

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakWait bounds how long TestMain waits for the tests' goroutines (a
// server's, a client connection's) to end.
const leakWait = 20 * time.Second

// TestMain fails the package's tests if any goroutine (a server, a client
// connection) outlives them. goleak.VerifyTestMain gives up after about
// half a second, which a loaded machine can take to run a goroutine that
// is on its way out: this waits up to leakWait.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakWait)
		for {
			err := goleak.Find() // retries for about 0.4s itself
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "goleak: goroutines still running %v after the tests: %v\n", leakWait, err)
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}
