package redisbucket

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// TestBreakerOneProbe: when the back-off ends, of many goroutines
// released together exactly one gets the probe, the others are refused,
// and while it is out every call is refused; a probe whose caller gave up
// lets the next call probe; failures that end after the breaker opened
// change nothing.
func TestBreakerOneProbe(t *testing.T) {
	clk := clock.NewManual(0)
	b := &breaker{cfg: Breaker{Failures: 2, Backoff: time.Second, MaxBackoff: 8 * time.Second, Clock: clk}}
	cause := errors.New("timeout")
	for range 2 {
		if _, err := b.enter(); err != nil {
			t.Fatal(err)
		}
	}
	if ev := b.exit(false, failed, cause); ev != nil {
		t.Fatalf("one failure of 2 reported %v", ev)
	}
	if ev := b.exit(false, failed, cause); !errors.Is(ev, ErrCircuitOpen) {
		t.Fatalf("the second failure reported %v; want ErrCircuitOpen", ev)
	}
	if ev := b.exit(false, failed, cause); ev != nil { // entered before it opened
		t.Fatalf("a failure after the opening reported %v", ev)
	}
	for round := range 3 {
		clk.Advance(b.backoff)
		var probes, refusals atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Go(func() {
				<-start
				probe, err := b.enter()
				switch {
				case probe && err == nil:
					probes.Add(1)
				case !probe && errors.Is(err, ErrCircuitOpen):
					refusals.Add(1)
				default:
					t.Errorf("enter() = %v, %v while open", probe, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if probes.Load() != 1 || refusals.Load() != 63 {
			t.Fatalf("round %d: %d probes, %d refusals of 64; want 1 and 63", round, probes.Load(), refusals.Load())
		}
		if round == 0 {
			// The probe's caller gave up: the next call probes at once.
			if ev := b.exit(true, gaveUp, nil); ev != nil {
				t.Fatalf("a probe given up reported %v", ev)
			}
			if probe, err := b.enter(); !probe || err != nil {
				t.Fatalf("after a probe was given up, enter() = %v, %v; want the probe", probe, err)
			}
		}
		want := min(time.Second<<(round+1), 8*time.Second)
		if ev := b.exit(true, failed, cause); !errors.Is(ev, ErrCircuitOpen) || b.backoff != want {
			t.Fatalf("round %d: a failed probe reported %v, back-off %v; want ErrCircuitOpen, %v", round, ev, b.backoff, want)
		}
	}
	clk.Advance(b.backoff)
	if probe, err := b.enter(); !probe || err != nil {
		t.Fatalf("enter() = %v, %v; want the probe", probe, err)
	}
	if ev := b.exit(true, answered, nil); !errors.Is(ev, ErrCircuitClosed) || b.state.Load() != stClosed {
		t.Fatalf("an answered probe reported %v, state %d; want ErrCircuitClosed, closed", ev, b.state.Load())
	}
	if probe, err := b.enter(); probe || err != nil {
		t.Fatalf("closed: enter() = %v, %v", probe, err)
	}
	if b.opens.Load() != 4 || b.closes.Load() != 1 || b.refused.Load() != 3*63 {
		t.Fatalf("counts: %d opens, %d closes, %d refused; want 4, 1, %d", b.opens.Load(), b.closes.Load(), b.refused.Load(), 3*63)
	}
}

// TestShare: a limit shared among n nodes keeps its rate over n times the
// period, with Burst/n (at least 1); where n times the period overflows,
// the rate is divided instead.
func TestShare(t *testing.T) {
	for _, c := range []struct {
		l    keyrate.Limit
		n    int
		want keyrate.Limit
	}{
		{keyrate.PerSecond(10).WithBurst(20), 4, keyrate.Limit{Rate: 10, Per: 4 * time.Second, Burst: 5}},
		{keyrate.PerSecond(10).WithBurst(3), 4, keyrate.Limit{Rate: 10, Per: 4 * time.Second, Burst: 1}},
		{keyrate.PerSecond(10).WithBurst(3), 1, keyrate.PerSecond(10).WithBurst(3)},
		{keyrate.Limit{Rate: 100, Per: math.MaxInt64 / 2, Burst: 9}, 4, keyrate.Limit{Rate: 25, Per: math.MaxInt64 / 2, Burst: 2}},
	} {
		if got := share(c.l, c.n); got != c.want {
			t.Errorf("share(%v, %d) = %v; want %v", c.l, c.n, got, c.want)
		}
	}
}
