package atomicbucket_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// TestConformanceHot runs the whole suite with every key hot, on 4 shards
// whose batches live for an hour, so that the suite's slow keys (a few
// tokens a second or an hour) are served from batches too, and on the
// default shards and lifetime.
func TestConformanceHot(t *testing.T) {
	t.Run("lifetime=1h", func(t *testing.T) {
		conformance.Run(t, bounded.Store(atomicbucket.WithAllHot(4, time.Hour)))
	})
	t.Run("lifetime=default", func(t *testing.T) {
		conformance.Run(t, bounded.Store(atomicbucket.WithAllHot(0, 0)))
	})
}

// TestPoliciesHot runs the policy checks (tiers, SetPolicy, several
// windows, carries) with every key hot.
func TestPoliciesHot(t *testing.T) {
	conformance.RunPolicies(t, bounded.With(atomicbucket.WithAllHot(4, time.Hour)))
}

// TestWaitHot runs the reservation and wait checks with every key hot, on
// 4 shards whose batches live for an hour, and CancelRace, a reservation
// made while a cancel runs (a hook on the clock).
func TestWaitHot(t *testing.T) {
	b := bounded.With(atomicbucket.WithAllHot(4, time.Hour))
	conformance.RunWait(t, b)
	t.Run("CancelRace", func(t *testing.T) { conformance.CancelRace(t, b) })
}

// TestMultiKeyHot runs keyrate.AllowAll's checks with every key hot (on 4
// shards whose batches live for an hour), where AllowAll gives the
// request's hot keys' shards back and decides it in turn. (Not
// RunMultiKeyUndo: it checks the in-store path, which a request with a
// hot key does not take.)
func TestMultiKeyHot(t *testing.T) {
	open := conformance.NewOpenCarry(func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) {
		return atomicbucket.New(l, append([]keyrate.Option{atomicbucket.WithAllHot(4, time.Hour)}, o...)...)
	})
	conformance.RunMultiKey(t, conformance.MultiKey{Open: open})
	t.Run("ZeroAllocs", func(t *testing.T) { conformance.MultiKeyZeroAllocs(t, open) })
}

// hotStore returns a store enforcing l on a manual clock, with "hot" a hot
// key of shards shards whose batches live for lifetime.
func hotStore(t *testing.T, l keyrate.Limit, shards int, lifetime time.Duration) (*atomicbucket.Store, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(time.Hour)
	s, err := atomicbucket.New(l, keyrate.WithClock(clk), atomicbucket.WithHotKeys("hot"),
		atomicbucket.WithHotShards(shards, lifetime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clk
}

// TestHotFrozenBarrier: goroutines released together on one hot key with
// the clock stopped admit exactly Burst, at every GOMAXPROCS: never more
// (a batch served twice, a give-back that returns more than was charged),
// never fewer (a denial before the shards' batches and covers came back).
// The second call must take a batch (the word then lacks its tokens and
// cover), so the shards are in play.
func TestHotFrozenBarrier(t *testing.T) {
	for _, p := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			const burst = 1000
			l := keyrate.PerSecond(1_000_000).WithBurst(burst) // a batch of 1000/64 = 15, cover 15
			s, _ := hotStore(t, l, 16, 0)
			if !s.Allow("hot") || !s.Allow("hot") { // the first inserts the key
				t.Fatal("a first call was denied")
			}
			if d := s.Peek("hot"); d.Remaining != burst-1-15-15 {
				t.Fatalf("after two calls the word holds %d, want %d: no batch was taken", d.Remaining, burst-31)
			}
			var admitted atomic.Int64
			admitted.Add(2)
			conformance.Together(16, func(g int) {
				for i := range 200 {
					cost := 1
					if (g+i)%5 == 0 {
						cost = 2
					}
					if d, err := s.AllowN("hot", cost); err == nil && d.Allowed {
						admitted.Add(int64(cost))
					}
				}
			})
			for s.Allow("hot") { // what a cost-2 denial may have left, one by one
				admitted.Add(1)
			}
			if got := admitted.Load(); got != burst {
				t.Fatalf("admitted %d with the clock stopped, want exactly %d", got, burst)
			}
		})
	}
}

// TestHotSteppingBound: with the clock stepping while goroutines hammer a
// hot key, the total admitted never exceeds Burst + Rate·T/Per, and the
// key is not starved (at least the burst).
func TestHotSteppingBound(t *testing.T) {
	const rate, burst = 10_000, 800
	s, clk := hotStore(t, keyrate.PerSecond(rate).WithBurst(burst), 8, 0)
	var stop atomic.Bool
	var elapsed time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			d := time.Duration(1+i%7) * 100 * time.Microsecond
			clk.Advance(d)
			elapsed += d
			runtime.Gosched()
		}
	}()
	var admitted atomic.Int64
	var hw sync.WaitGroup
	for range 8 {
		hw.Add(1)
		go func() {
			defer hw.Done()
			for range 3000 {
				if s.Allow("hot") {
					admitted.Add(1)
				}
			}
		}()
	}
	hw.Wait()
	stop.Store(true)
	wg.Wait()
	bound := int64(burst) + int64(elapsed)*rate/int64(time.Second)
	if got := admitted.Load(); got > bound || got < burst {
		t.Fatalf("admitted %d over %v, want between the burst %d and the bound %d", got, elapsed, burst, bound)
	}
}

// TestHotZeroAllocs: a call on a hot key, served from a shard or from the
// word, allocates nothing.
func TestHotZeroAllocs(t *testing.T) {
	s, clk := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(1_000_000), 4, 0)
	s.Allow("hot")
	allocs := testing.AllocsPerRun(1000, func() {
		clk.Advance(time.Microsecond)
		s.Allow("hot")
		if _, err := s.AllowN("hot", 2); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Allow/AllowN on a hot key: %v allocations per run, want 0", allocs)
	}
}

// TestHotKeysOtherStores: another store given WithHotKeys fails with
// ErrInvalidOption naming the option.
func TestHotKeysOtherStores(t *testing.T) {
	_, err := mutexbucket.New(keyrate.PerSecond(1), atomicbucket.WithHotKeys("k"))
	if !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Fatalf("mutexbucket.New(WithHotKeys) = %v, want ErrInvalidOption", err)
	}
	_, err = striped.New(keyrate.PerSecond(1), atomicbucket.WithHotKeys("k"))
	if !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Fatalf("striped.New(WithHotKeys) = %v, want ErrInvalidOption", err)
	}
	if want := "atomicbucket.WithHotKeys"; err == nil || !contains(err.Error(), want) {
		t.Fatalf("error %v does not name %s", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestHotReserveDrains: a reservation on a hot key, with the clock
// stopped, gets the tokens its shards hold and the cover they were
// charged: Reserve gives the shards back first. Without that, the word
// alone lacks them and a reservation of the rest of the burst that may not
// wait is refused.
func TestHotReserveDrains(t *testing.T) {
	const burst = 1000
	s, _ := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(burst), 16, 0)
	if !s.Allow("hot") || !s.Allow("hot") { // the second takes a batch of 15, cover 15
		t.Fatal("a first call was denied")
	}
	if d := s.Peek("hot"); d.Remaining != burst-31 {
		t.Fatalf("the word holds %d, want %d: no batch was taken", d.Remaining, burst-31)
	}
	r, err := s.Reserve("hot", burst-2, 0)
	if err != nil || !r.OK() || r.Delay() != 0 {
		t.Fatalf("Reserve(%d, 0) = %+v, %v; want the rest of the burst at once", burst-2, r, err)
	}
	if s.Allow("hot") {
		t.Fatal("a call after the whole burst was allowed")
	}
}
