package striped

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/sweep"
)

// TestDenyTakesNoLock holds the lock of a denied key's stripe and makes
// the requests a known key's state already denies, on another goroutine:
// AllowN (cost 1 and 3), Allow and Reserve, for a token bucket and a fixed
// window. Each must return without the lock (a store that locked to deny
// would block, which the test sees in the goroutine's stack), with the
// Decision the locked path gives at the same reading once the lock is
// free (Remaining, RetryAfter, ResetAfter and the window alike).
func TestDenyTakesNoLock(t *testing.T) {
	for _, limit := range []keyrate.Limit{keyrate.Every(time.Hour).WithBurst(4), keyrate.Limit{Rate: 4, Per: time.Hour}.Using(keyrate.FixedWindow)} {
		t.Run(limit.Algorithm.String(), func(t *testing.T) {
			clk := clock.NewManual(time.Second)
			s, err := New(limit, keyrate.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			const key = "a denied key"
			if d, err := s.AllowN(key, 4); err != nil || !d.Allowed || s.Allow(key) {
				t.Fatalf("AllowN(%q, 4) = %+v, %v, then Allow allowed: want the burst of 4 spent", key, d, err)
			}
			clk.Advance(time.Minute)
			sp := s.tab.of(s.seed.Hash(key))
			for _, cost := range []int{1, 3} {
				sp.mu.Lock()
				var got keyrate.Decision
				var gotAllow bool
				var gotRes keyrate.Reservation
				whileLocked(t, sp, func() {
					got, _ = s.AllowN(key, cost)
					gotAllow = s.Allow(key)
					gotRes, _ = s.Reserve(key, cost, time.Minute)
				})
				sp.mu.Unlock()
				rs := s.pols.Default()
				st, at, denied, _ := s.tab.take(s, key, s.seed.Hash(key), rs, clk.Now(), cost, 0) // the locked path
				if want := rs.Decide(st[:1], at, cost, denied); got != want || denied < 0 {
					t.Errorf("cost %d: AllowN without the lock = %+v; the locked path gives %+v", cost, got, want)
				}
				if gotAllow || gotRes.OK() {
					t.Errorf("cost %d: Allow = %v, Reserve within a minute = %v on a bucket empty for an hour", cost, gotAllow, gotRes.OK())
				}
			}
		})
	}
}

// whileLocked runs f on a goroutine of its own while the caller holds
// sp.mu, and fails the test, releasing the lock, if f blocks on a mutex:
// seen in the goroutine's stack, so that the test neither sleeps nor
// depends on how busy the machine is.
func whileLocked(t *testing.T, sp *stripe, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runDenied(f)
	}()
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-done:
			return
		default:
		}
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "striped.runDenied") && strings.Contains(g, "sync.(*Mutex).Lock") {
				sp.mu.Unlock()
				<-done
				sp.mu.Lock()
				t.Fatalf("a denied request waited for its stripe's lock:\n%s", g)
			}
		}
		runtime.Gosched()
	}
}

// runDenied runs f: a frame of its own for whileLocked to find in a stack.
//
//go:noinline
func runDenied(f func()) { f() }

// TestSeekSpendAfterRebuild makes a spend on a stripe in its lock-free
// mode (a key of it was denied lately) find its key's slot without the
// lock, then wait for the lock, which the test holds while it grows the
// stripe's table (every slot moves to a new array). The spend must find
// the key again in the new array and take its token there: a spend that
// stored into the slot it found before the lock would leave the key's
// state in the table as it was, a token that was spent and never taken
// (an over-admission), which Peek's Remaining shows.
func TestSeekSpendAfterRebuild(t *testing.T) {
	clk := clock.NewManual(time.Second)
	s, err := New(keyrate.Every(time.Hour).WithBurst(4), keyrate.WithClock(clk), WithStripes(1))
	if err != nil {
		t.Fatal(err)
	}
	const spender, denied = "a spending key", "a denied key"
	if !s.Allow(spender) {
		t.Fatalf("Allow(%q) denied on a new key", spender)
	}
	if d, err := s.AllowN(denied, 4); err != nil || !d.Allowed || s.Allow(denied) {
		t.Fatalf("AllowN(%q, 4) = %+v, %v, then Allow allowed: want the burst of 4 spent", denied, d, err)
	}
	sp := &s.tab.stripes[0]
	if sp.seek.Load() <= 0 {
		t.Fatal("a deny left the stripe's seek count at 0: the spend below would not look its key up without the lock")
	}
	rs := s.pols.Default()
	sp.mu.Lock()
	gen := sp.m.Gen()
	var got keyrate.Decision
	done := untilLockWait(t, sp, func() { got, _ = s.AllowN(spender, 1) })
	// The spend has found its slot and waits for the lock: grow the table
	// under it with keys inserted as a store would (full buckets).
	for i := 0; sp.m.Gen() == gen; i++ {
		key := fmt.Sprintf("filler %d", i)
		var st sweep.States
		sp.floor.Start(rs, clk.Now(), st[:1])
		if !s.book.Reserve() || !sp.m.Insert(key, s.seed.Hash(key), rs, st[:1]) {
			t.Fatalf("inserting %q failed", key)
		}
	}
	sp.mu.Unlock()
	<-done
	if !got.Allowed || got.Remaining != 2 {
		t.Fatalf("AllowN(%q, 1) across a rebuild = %+v; want allowed with 2 left", spender, got)
	}
	if d := s.Peek(spender); d.Remaining != 2 {
		t.Fatalf("after a spend across a rebuild, Peek(%q).Remaining = %d, want 2: the spend's token was not taken from the table", spender, d.Remaining)
	}
}

// untilLockWait runs f on a goroutine of its own while the caller holds
// sp.mu, and returns once f waits for that mutex (seen in the goroutine's
// stack: no sleep), with a channel closed when f returns. It fails the
// test if f returns without waiting.
func untilLockWait(t *testing.T, sp *stripe, f func()) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runWaiting(f)
	}()
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-done:
			sp.mu.Unlock()
			t.Fatal("the call returned without waiting for its stripe's lock")
		default:
		}
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "striped.runWaiting") && strings.Contains(g, "sync.(*Mutex).Lock") {
				return done
			}
		}
		runtime.Gosched()
	}
}

// runWaiting runs f: a frame of its own for untilLockWait to find in a
// stack.
//
//go:noinline
func runWaiting(f func()) { f() }
