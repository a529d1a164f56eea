package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// algModel is what the algorithm tests ask of a reference: WindowModel or
// LogModel.
type algModel interface {
	Allows(t, c int64) bool
	Take(t, c int64) bool
	Refund(t, c int64)
	Remaining(t int64) int64
	Decide(t, c int64, allowed bool) keyrate.Decision
}

// newModel returns the reference of an empty key under l.
func newModel(l keyrate.Limit) algModel {
	if l.Algorithm == keyrate.SlidingLog {
		return NewLogModel(l)
	}
	return NewWindowModel(l)
}

// runLog checks keyrate.SlidingLog on b: a store that carries it (the
// differential and concurrency tests of RunAlgorithms, boundaries, Wait
// refused, a change of policy, no allocation on a known key), or one that
// refuses it with ErrUnsupportedAlgorithm at New and SetPolicy.
func runLog(t *testing.T, b Bounded) {
	limit := keyrate.Limit{Rate: 5, Per: time.Second}.Using(keyrate.SlidingLog)
	l, err := b.New(t, limit, clock.NewManual(start))
	if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Run("Refused", func(t *testing.T) { testLogRefused(t, b, err) })
		return
	}
	if err != nil {
		t.Fatalf("New(%v): %v", limit, err)
	}
	l.Close()
	alg := keyrate.SlidingLog
	for _, mode := range keyModes {
		t.Run(mode.name, func(t *testing.T) {
			m := b.With(mode.opts...)
			t.Run("Differential", func(t *testing.T) { testWindowDifferential(t, m, alg) })
			t.Run("Concurrent", func(t *testing.T) { testWindowConcurrent(t, m, alg) })
		})
	}
	t.Run("Boundaries", func(t *testing.T) { testLogBoundaries(t, b) })
	t.Run("NoWait", func(t *testing.T) { testLogNoWait(t, b) })
	t.Run("Policies", func(t *testing.T) { testLogPolicies(t, b) })
	t.Run("ZeroAllocs", func(t *testing.T) { testWindowZeroAllocs(t, b, alg) })
	t.Run("ZeroAllocsDenied", func(t *testing.T) { testLogZeroAllocsDenied(t, b) })
}

// testLogZeroAllocsDenied checks a full log's denials (its retry found by
// binary search over the ring) and refunds allocate nothing.
func testLogZeroAllocsDenied(t *testing.T, b Bounded) {
	l, clk := openWindow(t, b, keyrate.PerMinute(100).Using(keyrate.SlidingLog))
	pl, _ := l.(keyrate.PolicyLimiter)
	for range 100 {
		clk.Advance(time.Millisecond)
		l.Allow("k")
	}
	if n := testing.AllocsPerRun(200, func() {
		clk.Advance(time.Microsecond)
		l.AllowN("k", 3)
		l.Peek("k")
		if pl != nil {
			pl.Refund("k", 1)
			l.Allow("k")
		}
	}); n != 0 {
		t.Fatalf("AllowN/Peek/Refund on a full log: %v allocations per run, want 0", n)
	}
}

// testLogRefused checks a store that cannot carry a log: New's error
// (err) wraps ErrInvalidLimit too, and SetPolicy refuses a log policy.
func testLogRefused(t *testing.T, b Bounded, err error) {
	if !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Errorf("New(sliding-log) = %v, want it to wrap ErrInvalidLimit too", err)
	}
	namesPackageOnce(t, "New(sliding-log)", err)
	l, clk := openWindow(t, b, keyrate.PerSecond(5))
	_ = clk
	pl, ok := l.(keyrate.PolicyLimiter)
	if !ok {
		return
	}
	err = pl.SetPolicy(keyrate.Policy{Name: "log", Limits: []keyrate.Limit{keyrate.PerSecond(5).Using(keyrate.SlidingLog)}})
	if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) || !errors.Is(err, keyrate.ErrInvalidPolicy) {
		t.Errorf("SetPolicy(sliding-log) = %v, want ErrUnsupportedAlgorithm and ErrInvalidPolicy", err)
	}
	namesPackageOnce(t, "SetPolicy(sliding-log)", err)
	if d, err := l.AllowN("k", 5); err != nil || !d.Allowed {
		t.Errorf("after a refused SetPolicy, AllowN = %+v, %v", d, err)
	}
}

// testLogBoundaries fills a log of N = 4 per W = 1s with a burst at t0,
// and checks the first request at W − 1, W and W + 1 after it, and, for a
// log whose admissions are spread, the last and first tick of each one's
// window: exactly N in any window of length W.
func testLogBoundaries(t *testing.T, b Bounded) {
	const w = time.Second
	limit := keyrate.Limit{Rate: 4, Per: w}.Using(keyrate.SlidingLog)
	for _, after := range []time.Duration{w - 1, w, w + 1} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			l, clk := openWindow(t, b, limit)
			clk.Advance(123 * time.Millisecond)
			if d, _ := l.AllowN("k", 4); !d.Allowed || d.Remaining != 0 || d.ResetAfter != w {
				t.Fatalf("the burst: %+v", d)
			}
			if d, _ := l.AllowN("k", 1); d.Allowed || d.RetryAfter != w {
				t.Fatalf("right after the burst: %+v, want denied, RetryAfter %v", d, w)
			}
			clk.Advance(after)
			d, _ := l.AllowN("k", 4)
			if want := after >= w; d.Allowed != want {
				t.Fatalf("AllowN(4) %v after the burst = %+v, want Allowed %v", after, d, want)
			}
			if after < w && d.RetryAfter != 1 {
				t.Fatalf("1ns before the burst leaves: RetryAfter = %v, want 1ns", d.RetryAfter)
			}
		})
	}
	t.Run("spread", func(t *testing.T) {
		l, clk := openWindow(t, b, limit)
		m := NewLogModel(limit)
		// one request every quarter window: each later one at the last
		// tick of an earlier one's window, then at its first tick after
		var at []time.Duration
		for i := range 4 {
			at = append(at, time.Duration(i)*w/4)
		}
		for _, x := range at {
			clk.Set(start + x)
			if !l.Allow("k") || !m.Take(int64(x), 1) {
				t.Fatalf("request at %v denied", x)
			}
		}
		for _, x := range at {
			for _, y := range []time.Duration{x + w - 1, x + w} {
				if y < clk.Now()-start {
					continue
				}
				clk.Set(start + y)
				got, _ := l.AllowN("k", 1)
				want := m.Decide(int64(y), 1, m.Take(int64(y), 1))
				want.Policy, want.Limit = keyrate.DefaultPolicy, limit
				if got != want {
					t.Fatalf("at %v: %+v, model %+v", y, got, want)
				}
			}
		}
	})
}

// testLogNoWait checks that Reserve and Wait under a log are refused with
// ErrUnsupportedAlgorithm and spend nothing.
func testLogNoWait(t *testing.T, b Bounded) {
	l, _ := openWindow(t, b, keyrate.PerSecond(2).Using(keyrate.SlidingLog))
	wl, ok := l.(keyrate.WaitLimiter)
	if !ok {
		t.Skipf("%T is not a WaitLimiter", l)
	}
	if _, err := wl.Reserve("k", 1, time.Second); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Fatalf("Reserve = %v, want ErrUnsupportedAlgorithm", err)
	}
	if err := wl.Wait(t.Context(), "k", 1); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Fatalf("Wait = %v, want ErrUnsupportedAlgorithm", err)
	}
	if d, _ := l.AllowN("k", 2); !d.Allowed {
		t.Fatalf("after the refused Reserve and Wait, AllowN(2) = %+v: they spent", d)
	}
}

// testLogPolicies moves keys between a log and a token bucket and back,
// at random readings, and checks that no window of length W of the log
// ever admits more than N, counting what the key spent under the bucket
// as if logged (the bucket's debt is carried as one entry), and that a log
// policy of several windows is refused.
func testLogPolicies(t *testing.T, b Bounded) {
	const n, w = 6, time.Second
	logLimit := keyrate.Limit{Rate: n, Per: w}.Using(keyrate.SlidingLog)
	l, clk := openWindow(t, b, logLimit)
	pl, ok := l.(keyrate.PolicyLimiter)
	if !ok {
		t.Skipf("%T is not a PolicyLimiter", l)
	}
	bad := keyrate.Policy{Name: "two", Limits: []keyrate.Limit{logLimit, keyrate.PerSecond(3)}}
	if err := pl.SetPolicy(bad); !errors.Is(err, keyrate.ErrInvalidPolicy) {
		t.Fatalf("SetPolicy(log and a bucket) = %v, want ErrInvalidPolicy", err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var admitted []time.Duration // every admission, under either policy
	for i := range 400 {
		clk.Advance(time.Duration(rng.Int64N(int64(w / 5))))
		if i%37 == 0 {
			p := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{logLimit}}
			if i%74 == 0 {
				p.Limits = []keyrate.Limit{keyrate.Limit{Rate: n, Per: w, Burst: n}}
			}
			if err := pl.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(8) == 0 {
			l.Sweep()
		}
		cost := 1 + rng.IntN(3)
		if d, err := l.AllowN("k", cost); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			for range cost {
				admitted = append(admitted, clk.Now()-start)
			}
		}
	}
	// A token bucket of burst N admits up to 2N − 1 within W; across the
	// changes, every window of W admits at most 2N.
	for i := range admitted {
		j := i
		for j < len(admitted) && admitted[j] < admitted[i]+w {
			j++
		}
		if j-i > 2*n {
			t.Fatalf("%d admitted in [%v, %v), above 2N = %d", j-i, admitted[i], admitted[i]+w, 2*n)
		}
	}
}
