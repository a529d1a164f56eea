package redisbucket_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// sentHook is a go-redis hook that signals every command the client is
// about to send (a new connection's HELLO included).
type sentHook struct{ sent chan string }

func (h sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		select {
		case h.sent <- cmd.Name():
		default:
		}
		return next(ctx, cmd)
	}
}

func (h sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// changes records the breaker's state changes a store passes to OnError.
type changes struct {
	mu             sync.Mutex
	opens, closes  int
	other, lastErr error
}

func (c *changes) add(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, redisbucket.ErrCircuitOpen):
		c.opens++
		c.lastErr = err
	case errors.Is(err, redisbucket.ErrCircuitClosed):
		c.closes++
	}
}

func (c *changes) counts() (opens, closes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens, c.closes
}

// TestBreakerStoppedServer stops redis-server with SIGSTOP (a hung
// server: the kernel takes in every call, nothing answers) under a store
// of each failure policy with a breaker of 3 failures, a back-off of 1s
// doubling to 4s, on a manual clock. Three calls time out and open the
// breaker; then every call is answered at once by the policy, sending
// nothing, until the back-off ends; one probe goes through per back-off
// (the others refused while it hangs), each failed probe doubling the
// back-off; so the outage costs one timeout per back-off. Once the server
// resumes (SIGCONT), a probe closes the breaker and calls reach Redis
// again. Stats and OnError report each opening and closing.
func TestBreakerStoppedServer(t *testing.T) {
	for _, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			sent := make(chan string, 100)
			client := newClient(t, srv.Addr())
			client.AddHook(sentHook{sent})
			clk := clock.NewManual(0)
			var ch changes
			s := mustNew(t, client, faultLimit, append([]keyrate.Option{
				redisbucket.WithFailurePolicy(c.policy),
				redisbucket.WithTimeout(faultTimeout),
				redisbucket.WithTimeSource(clock.NewManual(start)),
				redisbucket.WithPrefix(uniquePrefix(t)),
				redisbucket.WithOnError(ch.add),
				redisbucket.WithBreaker(redisbucket.Breaker{Failures: 3, Backoff: time.Second, MaxBackoff: 4 * time.Second, Clock: clk}),
			}, c.opts...)...)
			answered(t, s, keys("warm-")) // loads the script
			drain := func() int {
				n := 0
				for {
					select {
					case name := <-sent:
						if name == "evalsha" || name == "eval" { // not a new connection's HELLO
							n++
						}
					default:
						return n
					}
				}
			}
			drain()

			srv.Stop(t)
			i := 0 // the degraded answers for key "k"
			call := func(what string) {
				t.Helper()
				var d keyrate.Decision
				var err error
				timed(t, what, func() { d, err = s.AllowN("k", 1) })
				c.check(t, i, d, err)
				if c.policy == redisbucket.FailClosed && !errors.Is(err, redisbucket.ErrUnavailable) {
					t.Fatalf("%s: %v; want ErrUnavailable", what, err)
				}
				i++
			}
			// refused makes n calls and checks that none was sent, each
			// answered by the policy, with ErrCircuitOpen under FailClosed.
			refused := func(what string, n int) {
				t.Helper()
				before := s.Stats()
				for range n {
					_, err := s.AllowN("k", 1)
					if c.policy == redisbucket.FailClosed && !errors.Is(err, redisbucket.ErrCircuitOpen) {
						t.Fatalf("%s: a refused call's error %v does not wrap ErrCircuitOpen", what, err)
					}
					if err != nil && strings.Count(err.Error(), "redisbucket: ") != 1 {
						t.Fatalf("%s: a refused call's error %q names the package more than once", what, err)
					}
					i++
				}
				after := s.Stats()
				if got := drain(); got != 0 || after.Calls != before.Calls || after.Errors != before.Errors {
					t.Fatalf("%s: the open breaker sent %d commands (Stats.Calls %d → %d, Errors %d → %d); want none",
						what, got, before.Calls, after.Calls, before.Errors, after.Errors)
				}
				if after.ShortCircuited-before.ShortCircuited != uint64(n) || after.Degraded-before.Degraded != uint64(n) || !after.BreakerOpen {
					t.Fatalf("%s: %d refused calls moved Stats from %+v to %+v", what, n, before, after)
				}
			}
			for k := range 3 {
				call("a call to the stopped server")
				if st := s.Stats(); st.Errors != uint64(k+1) || st.BreakerOpen != (k == 2) {
					t.Fatalf("after %d timeouts: %+v; want %d errors, open only after 3", k+1, st, k+1)
				}
			}
			if opens, _ := ch.counts(); opens != 1 || s.Stats().BreakerOpens != 1 {
				t.Fatalf("after 3 failures: OnError saw %d openings, Stats %+v; want 1", opens, s.Stats())
			}
			if !errors.Is(ch.lastErr, redisbucket.ErrUnavailable) || !isTimeout(ch.lastErr) {
				t.Fatalf("the opening's error %v does not wrap ErrUnavailable and the timeout", ch.lastErr)
			}
			drain()
			refused("open", 20)
			clk.Advance(999 * time.Millisecond)
			refused("1ms before the back-off ends", 5)

			// The probe: one call, hung until its timeout, while every
			// other call is refused.
			clk.Advance(time.Millisecond)
			done := make(chan struct{})
			var pd keyrate.Decision
			var perr error
			go func() {
				defer close(done)
				pd, perr = s.AllowN("k", 1)
			}()
			for name := range sent { // up to the probe's script call
				if name == "evalsha" {
					break
				}
			}
			refused("while the probe hangs", 5)
			<-done
			c.check(t, i, pd, perr)
			i++
			if st := s.Stats(); st.Errors != 4 || st.BreakerOpens != 2 || !st.BreakerOpen {
				t.Fatalf("after a failed probe: %+v; want 4 errors, 2 openings, open", st)
			}

			// The back-off doubled: 2s, then 4s, then 4s (the most).
			for _, backoff := range []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second} {
				clk.Advance(backoff - time.Millisecond)
				refused("before the doubled back-off ends", 3)
				clk.Advance(time.Millisecond)
				errs := s.Stats().Errors
				call("a probe")
				if got := drain(); got != 1 || s.Stats().Errors != errs+1 {
					t.Fatalf("a probe after %v sent %d commands, %d errors; want 1 timeout", backoff, got, s.Stats().Errors-errs)
				}
			}
			if opens, closes := ch.counts(); opens != 5 || closes != 0 || s.Stats().BreakerOpens != 5 {
				t.Fatalf("after 4 failed probes: OnError saw %d openings, %d closings, Stats %+v; want 5, 0", opens, closes, s.Stats())
			}
			if st := s.Stats(); st.Errors != 7 {
				t.Fatalf("the outage cost %d timeouts; want 7: 3 to open, then one per back-off", st.Errors)
			}

			srv.Cont(t)
			// The first probe after SIGCONT may still time out on a busy
			// machine: probe once per back-off until one is answered.
			deadline := time.Now().Add(answerWithin)
			for s.Stats().BreakerCloses == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no probe was answered within %v of SIGCONT: %+v", answerWithin, s.Stats())
				}
				clk.Advance(4 * time.Second)
				_, _ = s.AllowN("probe", 1)
			}
			if _, closes := ch.counts(); closes != 1 || s.Stats().BreakerOpen {
				t.Fatalf("after an answered probe: OnError saw %d closings, Stats %+v; want 1, closed", closes, s.Stats())
			}
			drain()
			if d := answered(t, s, keys("after-")); !d.Allowed || d.Limit != faultLimit {
				t.Fatalf("after the breaker closed: %+v; want Redis's answer", d)
			}
			if drain() == 0 {
				t.Fatal("after the breaker closed, calls sent nothing")
			}
		})
	}
}

// TestBreakerOptions: WithBreaker's out-of-range fields are
// keyrate.ErrInvalidOption, sending nothing.
func TestBreakerOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	for _, b := range []redisbucket.Breaker{
		{Failures: -1},
		{Backoff: -time.Second},
		{Backoff: 2 * time.Hour},
		{MaxBackoff: -1},
		{MaxBackoff: 2 * time.Hour},
		{Clock: (*clock.Manual)(nil)},
	} {
		if _, err := redisbucket.New(client, faultLimit, redisbucket.WithEvictionAllowed(), redisbucket.WithBreaker(b)); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("WithBreaker(%+v): %v; want ErrInvalidOption", b, err)
		}
	}
}

// TestFleetOptions: WithNodeCount and WithFallbackNodes out of range, or
// without FallbackLocal, are keyrate.ErrInvalidOption, sending nothing.
func TestFleetOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	fallback := redisbucket.WithFailurePolicy(redisbucket.FallbackLocal)
	for i, opts := range [][]keyrate.Option{
		{redisbucket.WithNodeCount(redisbucket.NodeCount{})},
		{fallback, redisbucket.WithNodeCount(redisbucket.NodeCount{Every: -time.Second})},
		{fallback, redisbucket.WithNodeCount(redisbucket.NodeCount{Every: 2 * time.Hour})},
		{fallback, redisbucket.WithNodeCount(redisbucket.NodeCount{Clock: (*clock.Manual)(nil)})},
		{redisbucket.WithFallbackNodes(2)},
		{fallback, redisbucket.WithFallbackNodes(0)},
		{fallback, redisbucket.WithFallbackNodes(redisbucket.MaxFallbackNodes + 1)},
		{redisbucket.WithDenyCache(0)},
		{redisbucket.WithDenyCache(redisbucket.MaxDenyCacheKeys + 1)},
	} {
		if _, err := redisbucket.New(client, faultLimit, append(opts, redisbucket.WithEvictionAllowed())...); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("options %d: %v; want ErrInvalidOption", i, err)
		}
	}
}
