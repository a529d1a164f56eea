package inflight_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/conformance"
)

func TestConformance(t *testing.T) {
	conformance.RunInflight(t, func(t *testing.T, n int) (inflight.Limiter, string, error) {
		s, err := inflight.New(n)
		return s, "", err
	})
}

func mustNew(t *testing.T, n int) *inflight.Store {
	t.Helper()
	s, err := inflight.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSweepRacingAcquire: a sweep that runs between an acquire's lookup
// of an idle key and its count (the hook) retires the key the acquire
// loaded; the acquire must count into the key's new state, not into the
// deleted one, where no later acquire would see it. Without the dead mark
// the limit of 1 admits a second holder.
func TestSweepRacingAcquire(t *testing.T) {
	s2 := mustNew(t, 1)
	held, _ := s2.TryAcquire("k")
	held.Release() // k is idle: tracked, none held
	fired := false
	s2.SetHookLoaded(func(key string) {
		if fired {
			return
		}
		fired = true
		s2.Sweep()
		if got := s2.Held(key); got != -1 {
			t.Errorf("the sweep left %q tracked with %d held", key, got)
		}
	})
	a, err := s2.TryAcquire("k")
	if err != nil || !a.Acquired() {
		t.Fatalf("acquire across a sweep: %v, %v; want a slot", a.Acquired(), err)
	}
	s2.SetHookLoaded(nil)
	if !fired {
		t.Fatal("the hook did not run")
	}
	if got := s2.Held("k"); got != 1 {
		t.Errorf("after the acquire, the map holds %d of k's slots, want 1 (the acquire counted into a deleted state)", got)
	}
	if b, _ := s2.TryAcquire("k"); b.Acquired() {
		t.Error("a second holder was admitted under a limit of 1")
	}
	a.Release()
	if got := s2.Held("k"); got != 0 {
		t.Errorf("after release, k holds %d, want 0", got)
	}
}

// TestSweepKeepsHeld: a sweep deletes idle keys only; held slots keep
// their key, and a swept key starts again with none held.
func TestSweepKeepsHeld(t *testing.T) {
	s := mustNew(t, 2)
	a, _ := s.TryAcquire("busy")
	idle, _ := s.TryAcquire("idle")
	idle.Release()
	s.Sweep()
	if got, want := s.Len(), 1; got != want {
		t.Errorf("Len() after sweep = %d, want %d", got, want)
	}
	if got := s.Held("busy"); got != 1 {
		t.Errorf("busy holds %d after a sweep, want 1", got)
	}
	s.TryAcquire("busy")
	if b, _ := s.TryAcquire("busy"); b.Acquired() {
		t.Error("a sweep forgot a held slot: a third holder of 2 was admitted")
	}
	a.Release()
}

// TestSweepsAsItGrows: idle keys do not accumulate: after many keys come
// and go, the store tracks at most twice the sweep threshold.
func TestSweepsAsItGrows(t *testing.T) {
	s := mustNew(t, 1)
	for i := range 20000 {
		sl, _ := s.TryAcquire(fmt.Sprint("client-", i))
		sl.Release()
	}
	if got := s.Len(); got > 2*1024 {
		t.Errorf("Len() = %d after 20000 idle keys, want at most %d", got, 2*1024)
	}
}

// TestSweepStress: acquires and releases on a few keys race sweeps; no
// key ever has more than its limit out.
func TestSweepStress(t *testing.T) {
	const n, keys = 1, 2
	s := mustNew(t, n)
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	var out [keys]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Sweep()
				runtime.Gosched()
			}
		}
	}()
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := (i + r) % keys
				sl, _ := s.TryAcquire(fmt.Sprint("k", k))
				if !sl.Acquired() {
					continue
				}
				if c := out[k].Add(1); c > n {
					t.Errorf("key %d: %d out, limit %d", k, c, n)
				}
				runtime.Gosched()
				out[k].Add(-1)
				sl.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
}

// TestAcquireWaits: Acquire sleeps while the key is full and takes the
// slot a release frees.
func TestAcquireWaits(t *testing.T) {
	s := mustNew(t, 1)
	held, _ := s.TryAcquire("k")
	asleep := make(chan struct{})
	s.SetHookWait(func(string) { close(asleep) })
	got := make(chan inflight.Slot)
	go func() {
		sl, err := s.Acquire(context.Background(), "k")
		if err != nil {
			t.Error(err)
		}
		got <- sl
	}()
	<-asleep
	held.Release()
	sl := <-got
	if !sl.Acquired() {
		t.Fatal("Acquire returned without a slot")
	}
	if again, _ := s.TryAcquire("k"); again.Acquired() {
		t.Error("the waiter's slot was not counted")
	}
	sl.Release()
}

// TestAcquireCancelled: a cancelled wait returns an error wrapping the
// context's, with no slot, and counts nothing.
func TestAcquireCancelled(t *testing.T) {
	s := mustNew(t, 1)
	held, _ := s.TryAcquire("k")
	ctx, cancel := context.WithCancel(context.Background())
	s.SetHookWait(func(string) { cancel() })
	sl, err := s.Acquire(ctx, "k")
	if !errors.Is(err, context.Canceled) || sl.Acquired() {
		t.Fatalf("cancelled Acquire = %v, %v; want no slot and context.Canceled", sl.Acquired(), err)
	}
	held.Release()
	if got := s.Held("k"); got != 0 {
		t.Errorf("k holds %d after a cancelled wait and a release, want 0", got)
	}
	s.Sweep()
	if got := s.Len(); got != 0 {
		t.Errorf("a cancelled waiter kept its key from the sweep: Len() = %d", got)
	}
}

// TestAcquireManyWaiters: waiters beyond the limit all get a slot in
// turn as holders release, and never more than the limit at once.
func TestAcquireManyWaiters(t *testing.T) {
	const n, g = 2, 16
	s := mustNew(t, n)
	var out atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl, err := s.Acquire(context.Background(), "k")
			if err != nil {
				t.Error(err)
				return
			}
			if c := out.Add(1); c > n {
				t.Errorf("%d out, limit %d", c, n)
			}
			runtime.Gosched()
			out.Add(-1)
			sl.Release()
		}()
	}
	wg.Wait()
}

// TestZeroAllocs: a known key's acquire and release allocate nothing.
func TestZeroAllocs(t *testing.T) {
	s := mustNew(t, 4)
	warm, _ := s.TryAcquire("known")
	warm.Release()
	if a := testing.AllocsPerRun(1000, func() {
		sl, _ := s.TryAcquire("known")
		sl.Release()
	}); a != 0 {
		t.Errorf("TryAcquire+Release of a known key: %v allocations, want 0", a)
	}
}

// TestAcquireBadInput: Acquire with an invalid key returns TryAcquire's
// error at once, and a nil context is a wait with no end, not a panic.
func TestAcquireBadInput(t *testing.T) {
	s := mustNew(t, 1)
	var ctx context.Context // nil
	if sl, err := s.Acquire(ctx, ""); !errors.Is(err, keyrate.ErrInvalidKey) || sl.Acquired() {
		t.Errorf("Acquire(nil, \"\") = %v, %v; want ErrInvalidKey", sl.Acquired(), err)
	}
	sl, err := s.Acquire(ctx, "k")
	if err != nil || !sl.Acquired() {
		t.Errorf("Acquire(nil, \"k\") = %v, %v; want a slot", sl.Acquired(), err)
	}
	sl.Release()
}

// TestAcquireReleaseBeforeWait: a release between Acquire's refusal and
// its registering as a waiter (the hook) wakes no one, since no one waits
// yet; Acquire must see the free slot when it tries again after
// registering, not sleep. If it sleeps, the test cancels it and fails.
func TestAcquireReleaseBeforeWait(t *testing.T) {
	s := mustNew(t, 1)
	held, _ := s.TryAcquire("k")
	s.SetHookRefused(func(string) {
		s.SetHookRefused(nil)
		held.Release()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.SetHookWait(func(string) {
		t.Error("Acquire went to sleep with a slot free: the release before it registered was lost")
		cancel()
	})
	sl, err := s.Acquire(ctx, "k")
	if err != nil || !sl.Acquired() {
		t.Fatalf("Acquire = %v, %v; want the slot released before it waited", sl.Acquired(), err)
	}
	sl.Release()
}

// TestAcquireWaiterOnSweptKey: a sweep that found a key without waiters
// retires it after an Acquire has registered as a waiter on it (Sweep's
// check and its retiring are two steps). The waiter's retry then meets a
// new state of the key, which another acquire (B) has filled: it must
// not sleep on the retired state's channel, which no release closes any
// more, but wait on the key's new state, which B's release wakes. On the
// broken code the waiter sleeps until its deadline; on the fixed one it
// gets B's slot as soon as B releases it.
func TestAcquireWaiterOnSweptKey(t *testing.T) {
	s := mustNew(t, 1)
	a, _ := s.TryAcquire("k")
	checked, resume, swept := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.SetHookSweep(func(string) {
		close(checked) // Sweep found "k" with no waiter
		<-resume
	})
	var (
		refused atomic.Int32
		loads   atomic.Int32
		waits   atomic.Int32
		b       inflight.Slot
	)
	s.SetHookRefused(func(string) {
		if refused.Add(1) != 1 {
			return
		}
		a.Release() // no waiter yet: wakes no one
		go func() {
			defer close(swept)
			s.Sweep()
		}()
		<-checked // the sweep has checked "k" for waiters, and found none
	})
	s.SetHookLoaded(func(string) {
		// Load 1: the first try; 2: the retry after await, with the
		// waiter counted on the state the sweep is about to retire.
		if loads.Add(1) != 2 {
			return
		}
		close(resume)
		<-swept // "k" is retired and gone from the map
		var err error
		if b, err = s.TryAcquire("k"); err != nil || !b.Acquired() {
			t.Errorf("B's TryAcquire on the new state = %v, %v; want a slot", b.Acquired(), err)
		}
	})
	s.SetHookWait(func(string) {
		if waits.Add(1) == 1 {
			b.Release() // the slot the waiter should get
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a guard for the broken code, never reached by the fixed one
	defer cancel()
	sl, err := s.Acquire(ctx, "k")
	if err != nil || !sl.Acquired() {
		t.Fatalf("Acquire = %v, %v; want B's slot, released while it waited: it slept on the swept state, whose channel no release closes", sl.Acquired(), err)
	}
	sl.Release()
	if h := s.Held("k"); h != 0 {
		t.Fatalf("Held(k) = %d after every release, want 0", h)
	}
}

// TestAcquireBadKeyDoneContext: an invalid key is named as such whatever
// the context: a done one does not hide it behind its own error.
func TestAcquireBadKeyDoneContext(t *testing.T) {
	s, err := inflight.New(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, key := range []string{"", string(make([]byte, inflight.MaxKeyLen+1))} {
		slot, err := s.Acquire(ctx, key)
		if !errors.Is(err, keyrate.ErrInvalidKey) || errors.Is(err, context.Canceled) || slot.Acquired() {
			t.Fatalf("Acquire(done ctx, a key of %d bytes) = %v, %v; want an error wrapping keyrate.ErrInvalidKey alone", len(key), slot.Acquired(), err)
		}
	}
}
