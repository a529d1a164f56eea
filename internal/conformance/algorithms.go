package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// WindowAlgorithms are the algorithms other than the token bucket that
// every store carries in its packed State.
var WindowAlgorithms = []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow}

// RunAlgorithms checks the window algorithms on a bounded store, each with
// plain and with hashed keys: every decision against WindowModel, under
// sweeps, refunds and reservations; exact admission counts under
// concurrency; a policy mixing a token bucket and a window; Wait; and no
// allocation on a known key.
func RunAlgorithms(t *testing.T, b Bounded) {
	for _, alg := range WindowAlgorithms {
		t.Run("alg="+alg.String(), func(t *testing.T) {
			for _, mode := range keyModes {
				t.Run(mode.name, func(t *testing.T) {
					m := b.With(mode.opts...)
					t.Run("Differential", func(t *testing.T) { testWindowDifferential(t, m, alg) })
					t.Run("Concurrent", func(t *testing.T) { testWindowConcurrent(t, m, alg) })
				})
			}
			t.Run("Wait", func(t *testing.T) { testWindowWait(t, b, alg) })
			t.Run("ZeroAllocs", func(t *testing.T) { testWindowZeroAllocs(t, b, alg) })
		})
	}
	t.Run("Mixed", func(t *testing.T) { testWindowMixed(t, b) })
	t.Run("alg=sliding-log", func(t *testing.T) { runLog(t, b) })
}

// openWindow builds b under limit on a fresh manual clock reading start.
func openWindow(t *testing.T, b Bounded, limit keyrate.Limit, opts ...keyrate.Option) (keyrate.BoundedLimiter, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	l, err := b.New(t, limit, clk, opts...)
	if err != nil {
		t.Fatalf("New(%v): %v", limit, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, clk
}

// windowLimit returns a random window limit of alg: 1 to 40 per window of
// 1µs to 1ms, or per second.
func windowLimit(rng *rand.Rand, alg keyrate.Algorithm) keyrate.Limit {
	per := time.Duration(1+rng.IntN(1000)) * time.Microsecond
	if rng.IntN(4) == 0 {
		per = time.Second
	}
	return keyrate.Limit{Rate: 1 + rng.IntN(40), Per: per}.Using(alg)
}

// boundaryStep returns how far to move a clock reading start+now (now
// from the epoch) to land on or beside a window boundary, or anywhere.
func boundaryStep(rng *rand.Rand, now, per time.Duration) time.Duration {
	next := (now/per + 1) * per
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return next - 1 - now // the window's last nanosecond
	case 2:
		return next - now // the next window's first
	case 3:
		return next + 1 - now
	case 4:
		return time.Duration(rng.Int64N(int64(per)))
	}
	return time.Duration(rng.Int64N(int64(3 * per)))
}

func testWindowDifferential(t *testing.T, b Bounded, alg keyrate.Algorithm) {
	rng := rand.New(rand.NewPCG(uint64(alg), 3))
	keys := []string{"a", "b", "c"}
	for round := range 40 {
		limit := windowLimit(rng, alg)
		l, clk := openWindow(t, b, limit)
		wl, _ := l.(keyrate.WaitLimiter)
		pl, _ := l.(keyrate.PolicyLimiter)
		models := map[string]algModel{}
		for _, k := range keys {
			models[k] = newModel(limit)
		}
		var trail []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("round %d, %v, after\n%v\n%s", round, limit, trail, fmt.Sprintf(format, args...))
		}
		for range 150 {
			now := clk.Now() - start
			clk.Advance(boundaryStep(rng, now, limit.Per))
			now = clk.Now() - start
			k := keys[rng.IntN(len(keys))]
			m := models[k]
			cost := 1 + rng.IntN(limit.Rate)
			if rng.IntN(3) == 0 {
				cost = 1
			}
			switch op := rng.IntN(10); {
			case op == 0:
				trail = append(trail, fmt.Sprintf("t=%d sweep", now))
				l.Sweep()
			case op == 1 && pl != nil:
				trail = append(trail, fmt.Sprintf("t=%d refund %s %d", now, k, cost))
				if err := pl.Refund(k, cost); err != nil {
					fail("Refund: %v", err)
				}
				m.Refund(int64(now), int64(cost))
			case op == 2 && wl != nil:
				wait := time.Duration(rng.Int64N(int64(3 * limit.Per)))
				trail = append(trail, fmt.Sprintf("t=%d reserve %s %d wait %d", now, k, cost, wait))
				r, err := wl.Reserve(k, cost, wait)
				wm, window := m.(*WindowModel)
				if !window { // a log never waits
					if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
						fail("Reserve under %v = %v, want ErrUnsupportedAlgorithm", alg, err)
					}
					continue
				}
				if err != nil {
					fail("Reserve: %v", err)
				}
				slot, ok := wm.Reserve(int64(now), int64(cost), int64(wait))
				if r.OK() != ok || r.Delay() != time.Duration(slot)-now {
					fail("Reserve(%s, %d, %v) = OK %v, Delay %v; model %v, %v", k, cost, wait, r.OK(), r.Delay(), ok, time.Duration(slot)-now)
				}
			case op == 3:
				got := l.Peek(k)
				want := m.Decide(int64(now), 1, m.Allows(int64(now), 1))
				want.Policy, want.Limit = keyrate.DefaultPolicy, limit
				if got != want {
					fail("t=%d Peek(%s) = %+v, model %+v", now, k, got, want)
				}
			default:
				trail = append(trail, fmt.Sprintf("t=%d allow %s %d", now, k, cost))
				got, err := l.AllowN(k, cost)
				if err != nil {
					fail("AllowN: %v", err)
				}
				ok := m.Take(int64(now), int64(cost))
				want := m.Decide(int64(now), int64(cost), ok)
				want.Policy, want.Limit = keyrate.DefaultPolicy, limit
				if got != want {
					fail("t=%d AllowN(%s, %d) = %+v, model %+v", now, k, cost, got, want)
				}
			}
		}
	}
}

// testWindowConcurrent hammers one key from several goroutines at each of
// a series of frozen clock readings (with a sweeper beside them): each
// round must admit exactly what the model has left at that reading, no
// more (over-admission) and no less.
func testWindowConcurrent(t *testing.T, b Bounded, alg keyrate.Algorithm) {
	limit := keyrate.Limit{Rate: 50, Per: time.Millisecond}.Using(alg)
	l, clk := openWindow(t, b, limit)
	m := newModel(limit)
	rng := rand.New(rand.NewPCG(uint64(alg), 9))
	const goroutines, tries = 8, 20
	for round := range 60 {
		now := clk.Now() - start
		clk.Advance(boundaryStep(rng, now, limit.Per))
		now = clk.Now() - start
		want := m.Remaining(int64(now))
		want = min(want, goroutines*tries)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		startGate := make(chan struct{})
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startGate
				for range tries {
					if l.Allow("hot") {
						admitted.Add(1)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			l.Sweep()
		}()
		close(startGate)
		wg.Wait()
		if got := admitted.Load(); got != want {
			t.Fatalf("round %d at t=%v: %d goroutines × %d admitted %d, want exactly %d", round, now, goroutines, tries, got, want)
		}
		for range want {
			m.Take(int64(now), 1)
		}
	}
}

// testWindowWait checks Wait on a full window: it sleeps on the store's
// clock until the slot the model gives, and its cost then counts there.
func testWindowWait(t *testing.T, b Bounded, alg keyrate.Algorithm) {
	limit := keyrate.Limit{Rate: 3, Per: time.Second}.Using(alg)
	l, clk := openWindow(t, b, limit)
	wl, ok := l.(keyrate.WaitLimiter)
	if !ok {
		t.Skipf("%T is not a WaitLimiter", l)
	}
	m := NewWindowModel(limit)
	clk.Advance(400 * time.Millisecond)
	now := clk.Now() - start
	if d, _ := l.AllowN("k", 3); !d.Allowed {
		t.Fatal("the first burst was denied")
	}
	m.Take(int64(now), 3)
	slot := m.Earliest(int64(now), 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- wl.Wait(ctx, "k", 2) }()
	if err := clk.AwaitSleepers(ctx, 1); err != nil {
		t.Fatalf("Wait never slept: %v", err)
	}
	if next, ok := clk.Next(); !ok || next != start+time.Duration(slot) {
		t.Fatalf("Wait sleeps until %v, want the model's slot %v", next-start, time.Duration(slot))
	}
	clk.Set(start + time.Duration(slot) - 1)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its slot", err)
	default:
	}
	clk.Set(start + time.Duration(slot))
	if err := <-done; err != nil {
		t.Fatalf("Wait = %v", err)
	}
	m.Reserve(int64(now), 2, int64(time.Hour))
	now = clk.Now() - start
	got := l.Peek("k")
	if want := int(m.Remaining(int64(now))); got.Remaining != want {
		t.Fatalf("after Wait, Remaining = %d, model %d: the wait did not count at its slot", got.Remaining, want)
	}
}

func testWindowZeroAllocs(t *testing.T, b Bounded, alg keyrate.Algorithm) {
	l, clk := openWindow(t, b, keyrate.PerMinute(keyrate.MaxLogRate).Using(alg))
	l.Allow("k")
	if n := testing.AllocsPerRun(200, func() {
		clk.Advance(time.Microsecond)
		l.Allow("k")
		l.AllowN("k", 2)
		l.Peek("k")
	}); n != 0 {
		t.Fatalf("Allow/AllowN/Peek on a known key under %v: %v allocations per run, want 0", alg, n)
	}
}

// testWindowMixed checks a policy of a token bucket and a fixed window
// together, all or nothing, by hand-worked steps.
func testWindowMixed(t *testing.T, b Bounded) {
	mixed := keyrate.Policy{Name: "mixed", Limits: []keyrate.Limit{
		keyrate.PerSecond(10),
		keyrate.PerMinute(15).Using(keyrate.FixedWindow),
	}}
	l, clk := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(mixed))
	tier, err := l.Tier("mixed")
	if err != nil {
		t.Fatal(err)
	}
	allow := func(step string, cost int, want bool, window int) {
		t.Helper()
		d, err := l.AllowTier("k", tier, cost)
		if err != nil || d.Allowed != want || (!want && d.Window != window) {
			t.Fatalf("%s: AllowTier(%d) = %+v, %v; want Allowed %v (window %d)", step, cost, d, err, want, window)
		}
	}
	allow("burst", 10, true, -1)
	allow("bucket empty", 1, false, 0)
	clk.Advance(time.Second)
	allow("bucket refilled", 5, true, -1)
	allow("window full at 15", 1, false, 1)
	clk.Advance(time.Minute - time.Second - 1)
	allow("last ns of the minute", 1, false, 1)
	clk.Advance(1)
	allow("the next minute", 10, true, -1)
	d := l.Peek("k")
	if d.Allowed || d.Window != 0 || d.Remaining != 0 {
		t.Fatalf("Peek after the second burst = %+v, want denied by window 0", d)
	}
}
