package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
)

// InflightFactory returns a fresh concurrency limit of n slots per key,
// or the error its constructor returned. Keys the suite uses are unique
// to one call of the factory when prefixed with the returned prefix (a
// remote store may share its server between calls).
type InflightFactory func(t *testing.T, n int) (l inflight.Limiter, prefix string, err error)

// RunInflight runs the concurrency-limit suite against newLimiter: what
// every inflight.Limiter must do, in process or across a fleet.
func RunInflight(t *testing.T, newLimiter InflightFactory) {
	t.Run("Limit", func(t *testing.T) { testInflightLimit(t, newLimiter) })
	t.Run("ReleaseOnce", func(t *testing.T) { testInflightReleaseOnce(t, newLimiter) })
	t.Run("BadInput", func(t *testing.T) { testInflightBadInput(t, newLimiter) })
	t.Run("Barrier", func(t *testing.T) { testInflightBarrier(t, newLimiter) })
	t.Run("Stress", func(t *testing.T) { testInflightStress(t, newLimiter) })
	t.Run("NilContext", func(t *testing.T) { testInflightNilContext(t, newLimiter) })
	t.Run("ReleaseRace", func(t *testing.T) { testInflightReleaseRace(t, newLimiter) })
}

func mustInflight(t *testing.T, f InflightFactory, n int) (inflight.Limiter, string) {
	t.Helper()
	l, p, err := f(t, n)
	if err != nil {
		t.Fatalf("new limiter of %d: %v", n, err)
	}
	if got := l.Limit(); got != n {
		t.Fatalf("Limit() = %d, want %d", got, n)
	}
	return l, p
}

func tryAcquire(t *testing.T, l inflight.Limiter, key string, want bool, step string) inflight.Slot {
	t.Helper()
	s, err := l.TryAcquireContext(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: TryAcquireContext(%q): %v", step, key, err)
	}
	if s.Acquired() != want {
		t.Fatalf("%s: TryAcquireContext(%q).Acquired() = %v, want %v", step, key, s.Acquired(), want)
	}
	return s
}

// testInflightLimit: a key holds at most n slots; the n+1th is refused
// until one is released; another key is not affected.
func testInflightLimit(t *testing.T, f InflightFactory) {
	const n = 3
	l, p := mustInflight(t, f, n)
	a, b := p+"a", p+"b"
	var held []inflight.Slot
	for i := range n {
		held = append(held, tryAcquire(t, l, a, true, fmt.Sprint("acquire ", i+1)))
	}
	tryAcquire(t, l, a, false, "acquire n+1")
	other := tryAcquire(t, l, b, true, "another key")
	held[1].Release()
	again := tryAcquire(t, l, a, true, "after one release")
	tryAcquire(t, l, a, false, "n held again")
	for _, s := range append(held, again, other) {
		s.Release()
	}
	for i := range n {
		defer tryAcquire(t, l, a, true, fmt.Sprint("after all released, acquire ", i+1)).Release()
	}
}

// testInflightReleaseOnce: a second Release of a slot, a copy's Release,
// and the zero Slot's Release give nothing back; a slot released while
// another key reuses what it pointed to does not release that key's slot.
func testInflightReleaseOnce(t *testing.T, f InflightFactory) {
	l, p := mustInflight(t, f, 1)
	a, b := p+"a", p+"b"
	s := tryAcquire(t, l, a, true, "first")
	cp := s
	s.Release()
	s.Release()
	cp.Release()
	inflight.Slot{}.Release()
	s2 := tryAcquire(t, l, a, true, "after release")
	s.Release() // a stale release: must not free s2's slot
	cp.Release()
	tryAcquire(t, l, a, false, "a stale Release freed a held slot")
	// The in-process store reuses the handle s pointed to: give b a slot
	// from it, and check a stale Release of s leaves it held.
	s2.Release()
	sb := tryAcquire(t, l, b, true, "b")
	s.Release()
	s2.Release()
	tryAcquire(t, l, b, false, "a stale Release of another key's slot freed b's")
	sb.Release()
	tryAcquire(t, l, b, true, "b after its release").Release()
}

// testInflightBadInput: an empty key is an error wrapping
// keyrate.ErrInvalidKey, with the zero Slot; a limit out of range is one
// wrapping keyrate.ErrInvalidLimit. Neither panics.
func testInflightBadInput(t *testing.T, f InflightFactory) {
	l, _ := mustInflight(t, f, 1)
	for _, key := range []string{"", strings.Repeat("k", inflight.MaxKeyLen+1)} {
		s, err := l.TryAcquireContext(context.Background(), key)
		if !errors.Is(err, keyrate.ErrInvalidKey) || s.Acquired() {
			t.Errorf("TryAcquireContext(key of %d bytes) = %v, %v; want an error wrapping ErrInvalidKey", len(key), s.Acquired(), err)
		}
	}
	for _, n := range []int{0, -1, inflight.MaxLimit + 1} {
		if _, _, err := f(t, n); !errors.Is(err, keyrate.ErrInvalidLimit) {
			t.Errorf("new limiter of %d: err = %v, want an error wrapping ErrInvalidLimit", n, err)
		} else if !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("new limiter of %d: error %q does not name the value", n, err)
		}
	}
}

// testInflightBarrier: g goroutines started together acquire one key's
// slots and hold them until all have tried: exactly n are admitted.
func testInflightBarrier(t *testing.T, f InflightFactory) {
	const n, g = 5, 64
	l, p := mustInflight(t, f, n)
	key := p + "hot"
	var (
		start, tried sync.WaitGroup
		admitted     atomic.Int64
		done         sync.WaitGroup
	)
	start.Add(1)
	tried.Add(g)
	done.Add(g)
	for range g {
		go func() {
			defer done.Done()
			start.Wait()
			s, err := l.TryAcquireContext(context.Background(), key)
			if err != nil {
				t.Error(err)
			}
			if s.Acquired() {
				admitted.Add(1)
			}
			tried.Done()
			tried.Wait() // hold the slot until every goroutine has tried
			s.Release()
		}()
	}
	start.Done()
	done.Wait()
	if got := admitted.Load(); got != n {
		t.Errorf("%d goroutines started together: %d admitted, want %d", g, got, n)
	}
	for i := range n {
		defer tryAcquire(t, l, key, true, fmt.Sprint("after all released, acquire ", i+1)).Release()
	}
}

// testInflightStress: goroutines acquire and release a few keys in a
// loop, counting the slots each key has out; no key ever has more than n.
func testInflightStress(t *testing.T, f InflightFactory) {
	const n, keys = 2, 3
	l, p := mustInflight(t, f, n)
	g, rounds := 4*runtime.GOMAXPROCS(0), 2000
	if testing.Short() {
		rounds = 200
	}
	var out [keys]atomic.Int64
	var wg sync.WaitGroup
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := (i + r) % keys
				s, err := l.TryAcquireContext(context.Background(), fmt.Sprint(p, "k", k))
				if err != nil {
					t.Error(err)
					return
				}
				if !s.Acquired() {
					continue
				}
				if c := out[k].Add(1); c > n {
					t.Errorf("key %d: %d slots out, limit %d", k, c, n)
				}
				runtime.Gosched()
				out[k].Add(-1)
				s.Release()
				if r%7 == 0 {
					s.Release() // a second release must change nothing
				}
			}
		}()
	}
	wg.Wait()
}

// testInflightNilContext: a nil context is context.Background(), not a
// panic: it takes a slot, and the limit holds; Critical(nil)'s context
// takes one too.
func testInflightNilContext(t *testing.T, f InflightFactory) {
	l, p := mustInflight(t, f, 2)
	var nilCtx context.Context
	s, err := l.TryAcquireContext(nilCtx, p+"k")
	if err != nil || !s.Acquired() {
		t.Fatalf("TryAcquireContext(nil, key) = %v, %v; want a slot", s.Acquired(), err)
	}
	c, err := l.TryAcquireContext(inflight.Critical(nilCtx), p+"k")
	if err != nil || !c.Acquired() {
		t.Fatalf("TryAcquireContext(Critical(nil), key) = %v, %v; want a slot", c.Acquired(), err)
	}
	if x, _ := l.TryAcquireContext(nilCtx, p+"k"); x.Acquired() {
		t.Fatal("a third slot of a limit of 2 under a nil context")
	}
	s.Release()
	c.Release()
	tryAcquire(t, l, p+"k", true, "after the releases").Release()
}

// testInflightReleaseRace: goroutines started together release copies
// of one slot, while another slot of the key stays held: exactly one
// slot is given back, so exactly one acquire then succeeds.
func testInflightReleaseRace(t *testing.T, f InflightFactory) {
	const n, g = 3, 16
	l, p := mustInflight(t, f, n)
	key := p + "k"
	var held []inflight.Slot
	for i := range n {
		held = append(held, tryAcquire(t, l, key, true, fmt.Sprintf("acquire %d", i)))
	}
	victim := held[0]
	Together(g, func(int) { victim.Release() })
	tryAcquire(t, l, key, true, "after the racing releases of one slot")
	tryAcquire(t, l, key, false, "a second acquire: the racing releases gave back more than one slot")
}
