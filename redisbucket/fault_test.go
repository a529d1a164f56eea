package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/redisbucket"
)

// Timing of the fault tests. A wall-clock bound on a call must not be
// tighter than the behaviour it checks: on a loaded 2-core machine under
// the race detector a goroutine can wait hundreds of ms for a CPU, so a
// call that must return "at the timeout" is only required to return well
// before the server would have answered (hangBound), and the server is
// made slow for far longer than that.
const (
	// faultTimeout is the stores' timeout in the fault tests. Every call
	// that must succeed (before a kill, after a restart or a pause) is
	// retried until Redis answers (see answered), so under load it may
	// take several tries, never fail the test.
	faultTimeout = 100 * time.Millisecond
	// pauseFor is how long TestSlowServer's server takes no command in:
	// 30 times faultTimeout.
	pauseFor = 3 * time.Second
	// hangBound is the most any fault-test call may take: far above a
	// timeout plus any scheduling delay, and below the pause, so that a
	// call released by the pause's end rather than by its timeout fails.
	hangBound = pauseFor - faultTimeout
	// answerWithin bounds the wait for a server that is back to answer.
	answerWithin = time.Minute
)

// faultLimit is the stores' limit in the fault tests; fallbackLimit is
// FallbackLocal's, smaller, so that its answers are told apart.
var (
	faultLimit    = keyrate.PerHour(100)
	fallbackLimit = keyrate.PerHour(3)
)

// policyCase is one failure policy and how its answers during an outage
// must look: the call's i-th degraded answer for one key.
type policyCase struct {
	policy redisbucket.FailurePolicy
	opts   []keyrate.Option
	check  func(t *testing.T, i int, d keyrate.Decision, err error)
}

var policyCases = []policyCase{
	{redisbucket.FailClosed, nil, func(t *testing.T, i int, d keyrate.Decision, err error) {
		t.Helper()
		want := keyrate.Decision{Policy: keyrate.DefaultPolicy, Limit: faultLimit, RetryAfter: 36 * time.Second}
		if d != want || !errors.Is(err, redisbucket.ErrUnavailable) {
			t.Errorf("call %d: %+v, %v; want %+v and ErrUnavailable", i, d, err, want)
		}
	}},
	{redisbucket.FailOpen, nil, func(t *testing.T, i int, d keyrate.Decision, err error) {
		t.Helper()
		if want := (keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: faultLimit}); d != want || err != nil {
			t.Errorf("call %d: %+v, %v; want %+v and no error", i, d, err, want)
		}
	}},
	{redisbucket.FallbackLocal, []keyrate.Option{redisbucket.WithFallbackLimit(fallbackLimit)}, func(t *testing.T, i int, d keyrate.Decision, err error) {
		t.Helper()
		// The fallback's bucket for the key starts full, with a frozen clock.
		want := keyrate.Decision{Policy: keyrate.DefaultPolicy, Limit: fallbackLimit, RetryAfter: 20 * time.Minute, ResetAfter: time.Hour, WindowResetAfter: time.Hour}
		if i < 3 {
			reset := time.Duration(i+1) * 20 * time.Minute
			want = keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: fallbackLimit, Remaining: 2 - i, ResetAfter: reset, WindowResetAfter: reset}
		}
		if d != want || err != nil {
			t.Errorf("call %d: %+v, %v; want %+v and no error", i, d, err, want)
		}
	}},
}

// faultErrors records what a fault test's store passes to OnError.
type faultErrors struct {
	n    atomic.Int64
	mu   sync.Mutex
	last error
}

func (e *faultErrors) add(err error) {
	e.mu.Lock()
	e.last = err
	e.mu.Unlock()
	e.n.Add(1)
}

func (e *faultErrors) lastErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// openFault returns a store for c's policy on addr, with the given timeout
// and a frozen time source, recording OnError calls in errs.
func openFault(t *testing.T, addr string, c policyCase, errs *faultErrors, timeout time.Duration) (*redisbucket.Store, func()) {
	t.Helper()
	client := newClient(t, addr)
	s := mustNew(t, client, faultLimit, append([]keyrate.Option{
		redisbucket.WithFailurePolicy(c.policy),
		redisbucket.WithTimeout(timeout),
		redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithOnError(func(err error) {
			if errors.Is(err, redisbucket.ErrPolicyUnchecked) {
				return // New's check, which TestPolicyUnchecked tests
			}
			if !errors.Is(err, redisbucket.ErrUnavailable) {
				t.Errorf("OnError(%v): want an error wrapping ErrUnavailable", err)
			}
			errs.add(err)
		}),
	}, c.opts...)...)
	return s, func() { _ = client.Close() }
}

// timed runs f and fails t if it took hangBound or longer: f hung.
func timed(t *testing.T, what string, f func()) time.Duration {
	t.Helper()
	begin := time.Now()
	f()
	took := time.Since(begin)
	if took >= hangBound {
		t.Errorf("%s took %v: it hung (the bound, far past any timeout, is %v)", what, took, hangBound)
	}
	return took
}

// answered makes calls, each with a fresh key from next, until Redis
// answers one (the store counts no new error), and returns that call's
// Decision. It fails t if Redis does not answer within answerWithin. The
// calls before it may time out under load, or while a server wakes up:
// that is not what is tested.
func answered(t *testing.T, s *redisbucket.Store, next func() string) keyrate.Decision {
	t.Helper()
	deadline := time.Now().Add(answerWithin)
	for {
		before := s.Stats().Errors
		d, err := s.AllowN(next(), 1)
		if err == nil && s.Stats().Errors == before {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis did not answer within %v: %+v, %v", answerWithin, d, err)
		}
	}
}

// keys returns a function giving prefix0, prefix1, ...: a fresh key per
// call, so that a call that timed out after the script ran (spending a
// token) does not change what the next one finds.
func keys(prefix string) func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprint(prefix, n-1)
	}
}

// isTimeout reports whether err says a deadline ran out.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// TestKilledServer kills redis-server under a store of each policy: every
// call answers as the policy says without hanging, the outage shows in
// Stats and OnError, service resumes once a server is back on the same
// port, and no goroutine outlives the clients.
func TestKilledServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for _, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			var errs faultErrors
			s, closeClient := openFault(t, srv.Addr(), c, &errs, faultTimeout)
			if d := answered(t, s, keys("warm")); !d.Allowed || d.Remaining != 99 {
				t.Fatalf("before the kill: %+v; want allowed with 99 left", d)
			}
			before, errsBefore := s.Stats(), errs.n.Load()

			srv.Kill()
			// Goroutines mid-run: each call answers, as the policy says.
			const goroutines, calls = 4, 5
			var mu sync.Mutex
			var answers []keyrate.Decision
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < calls; i++ {
						timed(t, "AllowN during the outage", func() {
							d, err := s.AllowN("k", 1)
							if c.policy == redisbucket.FailClosed && !errors.Is(err, redisbucket.ErrUnavailable) {
								t.Errorf("AllowN = %+v, %v; want ErrUnavailable", d, err)
							}
							mu.Lock()
							answers = append(answers, d)
							mu.Unlock()
						})
					}
				}()
			}
			wg.Wait()
			admitted := 0
			for _, d := range answers {
				if d.Allowed {
					admitted++
				}
			}
			want := map[redisbucket.FailurePolicy]int{redisbucket.FailClosed: 0, redisbucket.FailOpen: goroutines * calls, redisbucket.FallbackLocal: 3}[c.policy]
			if admitted != want {
				t.Errorf("admitted %d of %d calls during the outage, want %d", admitted, len(answers), want)
			}
			// One more, in order, to check the answer field for field.
			timed(t, "AllowN during the outage", func() {
				d, err := s.AllowN("k2", 1)
				c.check(t, 0, d, err)
			})
			timed(t, "Peek during the outage", func() { s.Peek("k") })
			outage := uint64(goroutines*calls + 2)
			wantStats := redisbucket.Stats{Calls: before.Calls + outage, Errors: before.Errors + outage, Degraded: before.Degraded + outage}
			if st, n := s.Stats(), errs.n.Load()-errsBefore; st != wantStats || n != int64(outage) {
				t.Errorf("Stats = %+v, OnError calls %d during the outage; want %+v and %d OnError calls", st, n, wantStats, outage)
			}

			srv.Restart()
			// The pool's connections died with the server; the first calls
			// may fail on them. Poll until Redis answers again: the
			// restarted server is empty, so "k" is a full bucket.
			deadline := time.Now().Add(answerWithin)
			for before := s.Stats().Errors; ; before = s.Stats().Errors {
				d, err := s.PeekContext(t.Context(), "k")
				if s.Stats().Errors == before && err == nil {
					if want := (keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: faultLimit, Remaining: 100}); d != want {
						t.Fatalf("Peek after the restart = %+v, want %+v", d, want)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no answer from the restarted server within %v: %v", answerWithin, err)
				}
			}
			if d := answered(t, s, keys("after")); !d.Allowed || d.Remaining != 99 {
				t.Fatalf("after the restart: %+v; want allowed by Redis with 99 left", d)
			}
			closeClient()
			srv.Kill()
			if err := leaktest.Find(ignore); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSlowServer stops redis-server from taking in commands (CLIENT PAUSE,
// confirmed before the call: the effect of a server busy for that long)
// for 30 times the store's timeout: the call under test certainly meets a
// server that does not answer, and returns when its timeout runs out, with
// the policy's answer and the timeout's error, before the server would
// have answered; and Redis answers again once it resumes.
func TestSlowServer(t *testing.T) {
	for _, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			var errs faultErrors
			s, _ := openFault(t, srv.Addr(), c, &errs, faultTimeout)
			answered(t, s, keys("warm")) // loads the script and opens a connection

			// The call under test. It proves something only if it returned
			// while the server was still paused: the pause is in effect when
			// Pause returns, and lasts until at least pauseFor after it was
			// asked for. A machine so busy that the call came back later has
			// tested nothing: pause again, and repeat.
			var d keyrate.Decision
			var err error
			var took time.Duration
			var before redisbucket.Stats
			var errsBefore int64
			for attempt := 1; ; attempt++ {
				before, errsBefore = s.Stats(), errs.n.Load()
				paused := time.Now()
				srv.Pause(t, pauseFor)
				begin := time.Now()
				d, err = s.AllowN(fmt.Sprint("k", attempt), 1) // a key the fallback has not seen
				took = time.Since(begin)
				if time.Since(paused) < pauseFor {
					break
				}
				if attempt == 5 {
					t.Fatalf("in %d tries the call never returned within the %v pause (the last took %v: %+v, %v): its timeout did not bound it, or the machine is far too busy to test",
						attempt, pauseFor, took, d, err)
				}
				t.Logf("try %d: the call returned %v after the pause began, not within the %v pause; trying again", attempt, time.Since(paused), pauseFor)
				answered(t, s, keys(fmt.Sprint("between", attempt)))
			}
			// The call must have failed, by its timeout, and been counted.
			st := s.Stats()
			if st.Calls != before.Calls+1 || st.Errors != before.Errors+1 || st.Degraded != before.Degraded+1 || errs.n.Load() != errsBefore+1 {
				t.Fatalf("Stats = %+v (before %+v), OnError calls %d; want exactly one more call, error and degraded answer, and one OnError call",
					st, before, errs.n.Load()-errsBefore)
			}
			if e := errs.lastErr(); !isTimeout(e) {
				t.Errorf("OnError got %v, want the timeout's error", e)
			}
			if took < faultTimeout {
				t.Errorf("the degraded call took %v, less than the %v timeout", took, faultTimeout)
			}
			c.check(t, 0, d, err)

			// Once the pause ends Redis answers again, and the store with it.
			if d := answered(t, s, keys("fresh")); !d.Allowed || d.Remaining != 99 {
				t.Fatalf("after the pause: %+v; want Redis's answer, allowed with 99 left", d)
			}
		})
	}
}

// TestFallbackCostAboveItsBurst: under FallbackLocal, a cost the store's
// limit allows but the fallback's Burst cannot is denied, with no error and
// the RetryAfter FailClosed would give (the time the cost takes to accrue
// under the store's limit), never an error the docs do not promise.
func TestFallbackCostAboveItsBurst(t *testing.T) {
	var errs faultErrors
	s, _ := openFault(t, unreachable, policyCases[2], &errs, faultTimeout)
	for _, cost := range []int{4, 100} {
		d, err := s.AllowN("k", cost)
		want := keyrate.Decision{Policy: keyrate.DefaultPolicy, Limit: faultLimit, RetryAfter: time.Duration(cost) * 36 * time.Second}
		if d != want || err != nil {
			t.Errorf("AllowN(k, %d) during an outage = %+v, %v; want %+v and no error", cost, d, err, want)
		}
	}
	// The fallback's own bucket is untouched: its burst of 3 is all there.
	for i := range 3 {
		if d, err := s.AllowN("k", 1); !d.Allowed || d.Limit != fallbackLimit || err != nil {
			t.Errorf("AllowN(k, 1) #%d after the denied costs = %+v, %v; want the fallback's allowed answer", i, d, err)
		}
	}
	if st := s.Stats(); st.Degraded != 5 || st.Errors != 5 {
		t.Errorf("Stats = %+v, want 5 errors and 5 degraded", st)
	}
}
