package redisbucket_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// panicHook makes the client fail, or panic on, the next EVALSHA when
// armed.
type panicHook struct {
	fail, panics atomic.Bool
}

func (h *panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			if h.fail.Swap(false) {
				cmd.SetErr(errors.New("injected failure"))
				return cmd.Err()
			}
			if h.panics.Swap(false) {
				panic("a hook's panic")
			}
		}
		return next(ctx, cmd)
	}
}

func (h *panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBreakerProbePanics: when the client panics on the breaker's probe
// (a hook's panic, which the store lets unwind the caller, as
// TestPipelinePanic's leader), the breaker must still let a later call
// probe: a probe that unwinds exits the breaker with no verdict
// (Store.run), rather than leaving it probing for good, refusing every
// later call with Redis answering.
func TestBreakerProbePanics(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := &panicHook{}
	client.AddHook(hook)
	clk := clock.NewManual(0)
	s := mustNew(t, client, keyrate.PerHour(100), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithBreaker(redisbucket.Breaker{Failures: 1, Backoff: time.Second, Clock: clk}))
	if d, err := s.AllowN("k", 1); err != nil || !d.Allowed {
		t.Fatalf("AllowN = %+v, %v; want allowed", d, err)
	}
	hook.fail.Store(true)
	if _, err := s.AllowN("k", 1); !errors.Is(err, redisbucket.ErrUnavailable) {
		t.Fatalf("AllowN with the call failing: %v; want ErrUnavailable", err)
	}
	if !s.Stats().BreakerOpen {
		t.Fatalf("the breaker of 1 failure did not open: %+v", s.Stats())
	}
	clk.Advance(time.Second)
	hook.panics.Store(true)
	func() {
		defer func() {
			if r := recover(); r != "a hook's panic" {
				t.Fatalf("the probe recovered %v; want the hook's panic", r)
			}
		}()
		_, _ = s.AllowN("k", 1)
	}()
	clk.Advance(time.Hour) // past any back-off
	for i := range 3 {
		d, err := s.AllowN("k", 1)
		if err == nil && d.Allowed {
			return // a probe went through and Redis answered
		}
		if i == 2 {
			t.Fatalf("3 calls an hour after a probe panicked, Redis up: the last %+v, %v; Stats %+v: the breaker never probes again",
				d, err, s.Stats())
		}
	}
}
