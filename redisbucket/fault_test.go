package redisbucket_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// Timing of the fault tests: a call's timeout, and how far past it a call
// may return on a loaded machine under the race detector.
const (
	faultTimeout = 50 * time.Millisecond
	faultSlack   = 250 * time.Millisecond
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
		want := keyrate.Decision{Limit: faultLimit, RetryAfter: 36 * time.Second}
		if d != want || !errors.Is(err, redisbucket.ErrUnavailable) {
			t.Errorf("call %d: %+v, %v; want %+v and ErrUnavailable", i, d, err, want)
		}
	}},
	{redisbucket.FailOpen, nil, func(t *testing.T, i int, d keyrate.Decision, err error) {
		t.Helper()
		if want := (keyrate.Decision{Allowed: true, Limit: faultLimit}); d != want || err != nil {
			t.Errorf("call %d: %+v, %v; want %+v and no error", i, d, err, want)
		}
	}},
	{redisbucket.FallbackLocal, []keyrate.Option{redisbucket.WithFallbackLimit(fallbackLimit)}, func(t *testing.T, i int, d keyrate.Decision, err error) {
		t.Helper()
		// The fallback's bucket for the key starts full, with a frozen clock.
		want := keyrate.Decision{Limit: fallbackLimit, RetryAfter: 20 * time.Minute, ResetAfter: time.Hour}
		if i < 3 {
			want = keyrate.Decision{Allowed: true, Limit: fallbackLimit, Remaining: 2 - i, ResetAfter: time.Duration(i+1) * 20 * time.Minute}
		}
		if d != want || err != nil {
			t.Errorf("call %d: %+v, %v; want %+v and no error", i, d, err, want)
		}
	}},
}

// openFault returns a store for c's policy on addr, with the given timeout
// and a frozen time source, counting OnError calls in errs.
func openFault(t *testing.T, addr string, c policyCase, errs *atomic.Int64, timeout time.Duration) (*redisbucket.Store, func()) {
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
			errs.Add(1)
		}),
	}, c.opts...)...)
	return s, func() { _ = client.Close() }
}

// timed runs f and fails t if it took longer than the timeout allows.
func timed(t *testing.T, what string, f func()) time.Duration {
	t.Helper()
	begin := time.Now()
	f()
	took := time.Since(begin)
	if took > faultTimeout+faultSlack {
		t.Errorf("%s took %v, past the %v timeout (and %v slack)", what, took, faultTimeout, faultSlack)
	}
	return took
}

// TestKilledServer kills redis-server under a store of each policy: every
// call answers as the policy says within the timeout, the outage shows in
// Stats and OnError, service resumes once a server is back on the same
// port, and no goroutine outlives the clients.
func TestKilledServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for _, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			var errs atomic.Int64
			s, closeClient := openFault(t, srv.Addr(), c, &errs, faultTimeout)
			if d, err := s.AllowN("k", 1); !d.Allowed || d.Remaining != 99 || err != nil {
				t.Fatalf("before the kill: %+v, %v; want allowed with 99 left", d, err)
			}

			srv.Kill()
			// Goroutines mid-run: each call answers within the timeout.
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
			if st := s.Stats(); st != (redisbucket.Stats{Calls: 1 + outage, Errors: outage, Degraded: outage}) || errs.Load() != int64(outage) {
				t.Errorf("Stats = %+v, OnError calls %d; want %d calls, %d errors, %d degraded, %d OnError calls", st, errs.Load(), 1+outage, outage, outage, outage)
			}

			srv.Restart()
			// The pool's connections died with the server; the first calls
			// may fail on them. Poll until Redis answers again.
			deadline := time.Now().Add(10 * time.Second)
			for before := s.Stats().Errors; ; before = s.Stats().Errors {
				d, err := s.PeekContext(t.Context(), "k")
				if s.Stats().Errors == before && err == nil {
					// The restarted server is empty: a full bucket.
					if want := (keyrate.Decision{Allowed: true, Limit: faultLimit, Remaining: 100}); d != want {
						t.Fatalf("Peek after the restart = %+v, want %+v", d, want)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no answer from the restarted server within 10s: %v", err)
				}
			}
			if d, err := s.AllowN("k", 1); !d.Allowed || d.Remaining != 99 || err != nil {
				t.Fatalf("after the restart: %+v, %v; want allowed by Redis with 99 left", d, err)
			}
			closeClient()
			srv.Kill()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestSlowServer blocks redis-server with DEBUG SLEEP from another client:
// calls return at the timeout with the policy's answer, and Redis answers
// again once it wakes.
func TestSlowServer(t *testing.T) {
	for _, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			var errs atomic.Int64
			s, _ := openFault(t, srv.Addr(), c, &errs, faultTimeout)
			admin := newClient(t, srv.Addr())
			if !s.Allow("warm") { // loads the script and opens a connection
				t.Fatal("the first call was denied")
			}
			slept := make(chan error, 1)
			go func() { slept <- admin.Do(t.Context(), "DEBUG", "SLEEP", "0.5").Err() }()
			// Calls made before the server begins to sleep succeed; the
			// first that does not is the one under test.
			var d keyrate.Decision
			var err error
			var took time.Duration
			for s.Stats().Degraded == 0 {
				took = timed(t, "AllowN on a sleeping server", func() { d, err = s.AllowN("k", 1) })
			}
			if took < faultTimeout {
				t.Errorf("the degraded call took %v, less than the %v timeout", took, faultTimeout)
			}
			c.check(t, 0, d, err)
			if e := <-slept; e != nil {
				t.Fatalf("DEBUG SLEEP: %v", e)
			}
			d, err = s.AllowN("fresh", 1)
			if err != nil || !d.Allowed || d.Remaining != 99 {
				t.Fatalf("after the server woke: %+v, %v; want Redis's answer, allowed with 99 left", d, err)
			}
			if st := s.Stats(); st.Degraded != 1 || st.Errors != 1 || errs.Load() != 1 {
				t.Errorf("Stats = %+v, OnError calls %d; want one error, one degraded", st, errs.Load())
			}
		})
	}
}

// TestFallbackCostAboveItsBurst: under FallbackLocal, a cost the store's
// limit allows but the fallback's Burst cannot is denied, with no error and
// the RetryAfter FailClosed would give (the time the cost takes to accrue
// under the store's limit), never an error the docs do not promise.
func TestFallbackCostAboveItsBurst(t *testing.T) {
	var errs atomic.Int64
	s, _ := openFault(t, unreachable, policyCases[2], &errs, faultTimeout)
	for _, cost := range []int{4, 100} {
		d, err := s.AllowN("k", cost)
		want := keyrate.Decision{Limit: faultLimit, RetryAfter: time.Duration(cost) * 36 * time.Second}
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
