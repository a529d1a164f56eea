// Package leaktest fails a test binary that leaves goroutines running, with
// the patience a loaded machine needs: goleak alone gives up after about
// half a second, which a busy 2-core machine can take to schedule a
// goroutine that is already on its way out (a sweeper after Close, a
// server's connection after Shutdown). Only tests import it.
package leaktest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Wait bounds how long Find waits for goroutines to end.
const Wait = 20 * time.Second

// Find returns goleak's report of the goroutines still running, other than
// those opts ignore, once Wait has passed with some always running; or nil
// as soon as there are none.
func Find(opts ...goleak.Option) error {
	deadline := time.Now().Add(Wait)
	for {
		err := goleak.Find(opts...) // retries for about 0.4s itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// VerifyTestMain runs m's tests and then, if they passed, fails the binary
// if Find reports goroutines still running: call it from TestMain.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines still running %v after the tests: %v\n", Wait, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Verify fails t if Find reports goroutines still running: defer it at the
// start of a test, in place of goleak.VerifyNone, whose half second a
// loaded machine can use up before a goroutine already on its way out
// (a server's connection after Shutdown, a ticker after Close) has run.
func Verify(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Errorf("goroutines still running %v after the test: %v", Wait, err)
	}
}
