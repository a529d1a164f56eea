package conformance

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
)

// This file holds the eviction interleavings found from outside: each has
// a deterministic check, which drives the one bad interleaving every run
// (with a HookClock, or a closed store whose sweeps run on the caller),
// and a stress check that runs real goroutines.

// testOtherKeyEvicted: a sweep that evicts key a between a new key b's
// clock reading and its first spend leaves b's decision as it would be in
// a store that never evicts. The sweep reads the clock after b did, so
// the state it evicts (the floor that new buckets start from) may lie
// ahead of b's reading; spent at that reading, the floor would charge b
// the debt a had there.
func testOtherKeyEvicted(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10) // a token every 100ms, full 1s after being emptied
	for _, c := range []struct {
		cost int
		want keyrate.Decision
	}{
		{10, keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: 0, ResetAfter: time.Second, WindowResetAfter: time.Second}},
		{1, keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: 9, ResetAfter: 100 * time.Millisecond, WindowResetAfter: 100 * time.Millisecond}},
	} {
		t.Run(fmt.Sprint("cost=", c.cost), func(t *testing.T) {
			clk := NewHookClock(start)
			l, _ := openBounded(t, s, limit, keyrate.WithClock(clk))
			for l.Allow("a") { // emptied: full again at +1s
			}
			clk.Set(start + time.Second - time.Millisecond)
			// b's call reads +999ms; right after, time moves to +1s and
			// a sweep evicts a, which is full there.
			swept := -1
			clk.AtNextReading(func() {
				clk.Advance(time.Millisecond)
				swept = l.Sweep()
			})
			got, err := l.AllowN("b", c.cost)
			if !clk.Fired() || swept != 1 {
				t.Fatalf("the sweep in b's call did not run as planned (fired %v, removed %d): the interleaving was not driven", clk.Fired(), swept)
			}
			if err != nil || got != c.want {
				t.Fatalf("AllowN(new key b, %d), with key a evicted after b read the clock, = %+v, %v; want %+v, as if nothing were evicted",
					c.cost, got, err, c.want)
			}
			wantStats(t, l, keyrate.Stats{Keys: 1, Evictions: 1})
		})
	}
}

// testNewKeysUnderSweep is the stress line of testOtherKeyEvicted, on the
// system clock: goroutines spend once from brand-new keys, each full again
// 20µs after, while another sweeps without pause. A new key's first
// request is always allowed.
func testNewKeysUnderSweep(t *testing.T, s Bounded) {
	limit := keyrate.Limit{Rate: 1, Per: 20 * time.Microsecond, Burst: 1}
	l, err := s.New(t, limit, clock.NewManual(start), keyrate.WithClock(clock.System()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const g = 4
	n := 20000
	if racetest.Enabled || testing.Short() {
		n = 4000
	}
	var stop atomic.Bool
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		for !stop.Load() {
			l.Sweep()
			runtime.Gosched()
		}
	}()
	var denied atomic.Int64
	hammer(g, n, func(gi, i int) bool {
		d, err := l.AllowN(fmt.Sprint(gi, "/", i), 1)
		if err != nil || !d.Allowed {
			if denied.Add(1) == 1 {
				t.Errorf("first request of a new key = %+v, %v; want allowed", d, err)
			}
		}
		return true
	})
	stop.Store(true)
	sweeper.Wait()
	if k := denied.Load(); k != 0 {
		t.Fatalf("%d of %d brand-new keys were denied their first request", k, g*n)
	}
	if l.Stats().Evictions == 0 {
		t.Fatal("no evictions: the sweeps raced with nothing")
	}
}

// testFullStoreSweptUnderCaller: a new key that finds the store full is
// not refused when the sweep its own refusal starts frees room. After
// Close a store's paced sweeps run on the calling goroutine, inside the
// call that starts them, so the sweep frees the slots between the call's
// failed reservation and its own bounded scan every run (the scan then
// finds nothing left to evict). The call must try for a slot again.
func testFullStoreSweptUnderCaller(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10)
	l, clk := openBounded(t, s, limit, keyrate.WithMaxKeys(2))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Allow("a")
	l.Allow("b")
	clk.Advance(time.Second) // a and b full again: either may go
	for _, k := range []string{"c", "d"} {
		if d, err := l.AllowN(k, 1); err != nil || !d.Allowed {
			t.Fatalf("AllowN(%q) on a store of 2 full buckets with a cap of 2 = %+v, %v; want allowed (Stats %+v)", k, d, err, l.Stats())
		}
	}
	if st := l.Stats(); st.Keys != 2 || st.Refused != 0 || st.Evictions != 2 {
		t.Fatalf("Stats = %+v, want 2 keys, 2 evictions, none refused", st)
	}
	if _, err := l.AllowN("e", 1); !errors.Is(err, keyrate.ErrStoreFull) {
		t.Fatalf("AllowN(e) with c and d just spent = %v, want ErrStoreFull", err)
	}
}

// RunFullStore runs the checks of a full store's refusals against s, with
// plain and with hashed keys: for a store whose configuration changes how
// a refused request searches for room (striped.WithStripes), beside
// RunEviction's run of them under the default one.
func RunFullStore(t *testing.T, s Bounded) {
	for _, mode := range keyModes {
		t.Run(mode.name, func(t *testing.T) {
			m := s.with(mode.opts...)
			t.Run("FullStoreSweptUnderCaller", func(t *testing.T) { testFullStoreSweptUnderCaller(t, m) })
			t.Run("FullStoreChurn", func(t *testing.T) { testFullStoreChurn(t, m) })
		})
	}
}

// testFullStoreChurn is the stress line of testFullStoreSweptUnderCaller:
// one goroutine inserts a new key per call into a store of cap c, with
// the previous keys always full again, while the paced sweeps that its
// refusals start run beside it. With at most RefusalScan keys every bucket
// is within a refused call's own scan, so no call may be refused.
func testFullStoreChurn(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(1000) // one request leaves a bucket full again 1ms later
	n := 3000
	if racetest.Enabled || testing.Short() {
		n = 1000
	}
	for _, c := range []int{1, 2, 3, 8, 17, 32, 64} {
		t.Run(fmt.Sprint("cap=", c), func(t *testing.T) {
			l, clk := openBounded(t, s, limit, keyrate.WithMaxKeys(c))
			for i := 0; i < n; i++ {
				clk.Advance(time.Millisecond)
				if d, err := l.AllowN(fmt.Sprint("k", i), 1); err != nil || !d.Allowed {
					t.Fatalf("call %d: AllowN(new key) with every tracked bucket full = %+v, %v; want allowed (Stats %+v)", i, d, err, l.Stats())
				}
			}
		})
	}
}

// testLenWithinCap: Len and Stats.Keys never read above WithMaxKeys's
// cap, though keys are evicted and inserted all the while: the count must
// be a snapshot of one instant, not a sum over parts taken one after
// another (which can count a key evicted from one part and the key that
// took its slot in another).
func testLenWithinCap(t *testing.T, s Bounded) {
	const c = 8
	n := 4000
	if racetest.Enabled || testing.Short() {
		n = 1500
	}
	eachProcs(t, func(t *testing.T) {
		l, clk := openBounded(t, s, keyrate.PerSecond(1000), keyrate.WithMaxKeys(c))
		var stop atomic.Bool
		var readers sync.WaitGroup
		var over atomic.Int64
		readers.Add(1)
		go func() {
			defer readers.Done()
			for !stop.Load() {
				if k, st := l.Len(), l.Stats(); k > c || st.Keys > c {
					if over.Add(1) == 1 {
						t.Errorf("Len = %d, Stats.Keys = %d with WithMaxKeys(%d)", k, st.Keys, c)
					}
				}
			}
		}()
		hammer(4, n, func(gi, i int) bool {
			clk.Advance(time.Millisecond)
			l.Allow(fmt.Sprint(gi, "/", i))
			return true
		})
		stop.Store(true)
		readers.Wait()
		if k := l.Len(); k > c || k < 1 {
			t.Fatalf("Len = %d at rest, want 1 to %d", k, c)
		}
		if l.Stats().Evictions == 0 {
			t.Fatal("no evictions: the count was never under churn")
		}
	})
}
