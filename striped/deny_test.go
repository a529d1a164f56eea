package striped

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
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
