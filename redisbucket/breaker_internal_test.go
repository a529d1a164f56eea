package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	b := &breaker{cfg: Breaker{Failures: 2, Backoff: time.Second, MaxBackoff: 8 * time.Second, Clock: clk}, counts: new(breakerCounts)}
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
	if c := b.counts; c.opens.Load() != 4 || c.closes.Load() != 1 || c.refused.Load() != 3*63 {
		t.Fatalf("counts: %d opens, %d closes, %d refused; want 4, 1, %d", c.opens.Load(), c.closes.Load(), c.refused.Load(), 3*63)
	}
}

// TestShare: a limit shared among n nodes keeps its rate over n times the
// period, with Burst/n (at least 1); where n times the period overflows a
// Duration, the rate in lowest terms over n/g times it, or else a token
// every ⌈n·Per/Rate⌉; a share out of keyrate's range is an error. 10 a
// year among 1000 nodes is 1 per 100 years (it was 1 a year: 10 times the
// share, issue 31), 7 a year a token every 142.857… years, rounded up to
// a whole ns; 6 a year would be a token every 166 years, longer than
// keyrate fills a bucket of 1, and 1 a year one every 1000, longer than a
// Duration.
func TestShare(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, c := range []struct {
		l    keyrate.Limit
		n    int
		want keyrate.Limit // the zero Limit: an error
	}{
		{keyrate.PerSecond(10).WithBurst(20), 4, keyrate.Limit{Rate: 10, Per: 4 * time.Second, Burst: 5}},
		{keyrate.PerSecond(10).WithBurst(3), 4, keyrate.Limit{Rate: 10, Per: 4 * time.Second, Burst: 1}},
		{keyrate.PerSecond(10).WithBurst(3), 1, keyrate.PerSecond(10).WithBurst(3)},
		{keyrate.Limit{Rate: 100, Per: math.MaxInt64 / 2, Burst: 9}, 4, keyrate.Limit{Rate: 25, Per: math.MaxInt64 / 2, Burst: 2}},
		{keyrate.Limit{Rate: 10, Per: year, Burst: 10}, 1000, keyrate.Limit{Rate: 1, Per: 100 * year, Burst: 1}},
		{keyrate.Limit{Rate: 7, Per: year, Burst: 7}, 1000, keyrate.Limit{Rate: 1, Per: 4_505_142_857_142_857_143, Burst: 1}},
		{keyrate.Limit{Rate: 6, Per: year, Burst: 6}, 1000, keyrate.Limit{}},
		{keyrate.Limit{Rate: 1, Per: year, Burst: 1}, 1000, keyrate.Limit{}},
		// n·Per at the longest Duration, and just past it.
		{keyrate.Limit{Rate: 1000, Per: math.MaxInt64 / 1000, Burst: 1}, 1000, keyrate.Limit{Rate: 1000, Per: math.MaxInt64 / 1000 * 1000, Burst: 1}},
		{keyrate.Limit{Rate: 1000, Per: math.MaxInt64/1000 + 1, Burst: 1}, 1000, keyrate.Limit{Rate: 1, Per: math.MaxInt64/1000 + 1, Burst: 1}},
		{keyrate.Limit{Rate: 3, Per: time.Minute}.Using(keyrate.FixedWindow), 4, keyrate.Limit{Rate: 1, Per: time.Minute}.Using(keyrate.FixedWindow)},
	} {
		got, err := share(c.l, c.n)
		switch {
		case c.want == (keyrate.Limit{}):
			if !errors.Is(err, keyrate.ErrInvalidLimit) || !strings.Contains(err.Error(), c.l.String()) || !strings.Contains(err.Error(), fmt.Sprint(c.n, " fallback nodes")) {
				t.Errorf("share(%v, %d) = %v, %v; want an error wrapping ErrInvalidLimit naming the limit and n", c.l, c.n, got, err)
			}
		case got != c.want || err != nil:
			t.Errorf("share(%v, %d) = %v, %v; want %v", c.l, c.n, got, err, c.want)
		}
	}
	// Random limits, those of long periods most: a share is never above
	// 1/n of the rate (Rate'·n·Per ≤ Rate·Per'), its Burst is Burst/n or 1,
	// and it is valid.
	r := rand.New(rand.NewPCG(31, 4))
	for range 10_000 {
		l := keyrate.Limit{Rate: 1 + r.IntN(1_000_000), Per: time.Duration(r.Int64N(math.MaxInt64/2) + 1), Burst: 1 + r.IntN(100_000)}
		if l.Validate() != nil {
			continue
		}
		n := 2 + r.IntN(MaxFallbackNodes-1)
		s, err := share(l, n)
		if err != nil {
			if !errors.Is(err, keyrate.ErrInvalidLimit) {
				t.Fatalf("share(%v, %d): %v; want an error wrapping ErrInvalidLimit", l, n, err)
			}
			continue
		}
		lhs := new(big.Int).Mul(big.NewInt(int64(s.Rate)), new(big.Int).Mul(big.NewInt(int64(n)), big.NewInt(int64(l.Per))))
		rhs := new(big.Int).Mul(big.NewInt(int64(l.Rate)), big.NewInt(int64(s.Per)))
		if lhs.Cmp(rhs) > 0 || s.Burst != max(l.Burst/n, 1) || s.Validate() != nil {
			t.Fatalf("share(%v, %d) = %v: above 1/%d of the rate, a Burst other than %d, or invalid (%v)", l, n, s, n, max(l.Burst/n, 1), s.Validate())
		}
	}
}

// TestBreakersPerServer: on a client of several servers each server's
// calls go through a breaker of their own, found by the key's server
// (here a fake look-up), and one server's opening refuses no call to
// another; a key whose server is unknown goes through the store's one
// breaker. Once more servers have been seen than minSweep, and twice as
// many as the last sweep left, the breakers that are as good as new are
// dropped, and a later call makes another; an open one is kept.
func TestBreakersPerServer(t *testing.T) {
	clk := clock.NewManual(0)
	bs := newBreakers(Breaker{Failures: 2, Backoff: time.Second, MaxBackoff: time.Second, Clock: clk}, nil)
	clients := map[string]*redis.Client{}
	bs.node = func(_ context.Context, key string) (*redis.Client, error) {
		if key == "unknown" {
			return nil, errors.New("no slot map")
		}
		c, ok := clients[key]
		if !ok {
			c = redis.NewClient(&redis.Options{Addr: key})
			t.Cleanup(func() { _ = c.Close() })
			clients[key] = c
		}
		return c, nil
	}
	ctx := t.Context()
	a := bs.of(ctx, "127.0.0.1:1")
	if a == bs.one || bs.of(ctx, "127.0.0.1:1") != a || bs.of(ctx, "127.0.0.1:2") == a || bs.of(ctx, "unknown") != bs.one {
		t.Fatal("a server's calls do not go through one breaker of its own")
	}
	cause := errors.New("timeout")
	for range 2 {
		if _, err := a.enter(); err != nil {
			t.Fatal(err)
		}
	}
	a.exit(false, failed, cause)
	if ev := a.exit(false, failed, cause); !errors.Is(ev, ErrCircuitOpen) || !strings.Contains(ev.Error(), " at 127.0.0.1:1") {
		t.Fatalf("the second failure reported %v; want ErrCircuitOpen naming 127.0.0.1:1", ev)
	}
	if _, err := bs.of(ctx, "127.0.0.1:1").enter(); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("the first server's call after its breaker opened: %v; want refused", err)
	}
	if probe, err := bs.of(ctx, "127.0.0.1:2").enter(); probe || err != nil {
		t.Fatalf("the second's call while the first server's breaker is open: %v, %v; want it sent", probe, err)
	}
	if !bs.open() || bs.counts.opens.Load() != 1 || bs.counts.refused.Load() != 1 {
		t.Fatalf("open() = %v, %d opens, %d refused; want true, 1, 1", bs.open(), bs.counts.opens.Load(), bs.counts.refused.Load())
	}
	b := bs.of(ctx, "127.0.0.1:2")
	for i := 2; bs.size < minSweep; i++ {
		bs.of(ctx, fmt.Sprint("127.0.0.1:", 1000+i))
	}
	bs.of(ctx, "127.0.0.1:3") // the sweep: the first server's alone stays
	if bs.size != 2 || bs.kept != 1 || bs.of(ctx, "127.0.0.1:1") != a || bs.of(ctx, "127.0.0.1:2") == b {
		t.Fatalf("after a sweep: %d breakers, %d kept, the first server's kept %v, the second's made again %v; want 2, 1, true, true",
			bs.size, bs.kept, bs.of(ctx, "127.0.0.1:1") == a, bs.of(ctx, "127.0.0.1:2") != b)
	}
}
