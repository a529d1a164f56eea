package atomicbucket_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// TestLenMatchesTables: after goroutines have inserted, spent,
// flipped tiers, refunded, reserved and swept under WithMaxKeys (with a
// clock that moves, so that keys fill and are evicted on insertion, in
// sweeps and by refusals), Len and Stats.Keys equal the live keys of the
// tables, never exceeded the cap on the way, and every refusal was
// ErrStoreFull naming the cap.
func TestLenMatchesTables(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed=", hashed), func(t *testing.T) {
			const capKeys, g = 64, 4
			iters := 3000
			if testing.Short() {
				iters = 800
			}
			clk := clock.NewManual(time.Hour)
			opts := []keyrate.Option{keyrate.WithClock(clk), keyrate.WithMaxKeys(capKeys), keyrate.WithEvictionGrace(0),
				keyrate.WithPolicies(keyrate.Policy{Name: "multi", Limits: []keyrate.Limit{keyrate.PerSecond(50), {Rate: 100, Per: time.Minute, Burst: 100}}})}
			if hashed {
				opts = append(opts, keyrate.WithHashedKeys())
			}
			s, err := atomicbucket.New(keyrate.PerSecond(50), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			multi, _ := s.Tier("multi")
			def, _ := s.Tier(keyrate.DefaultPolicy)
			keys := diffKeys(200)
			keys[10] = strings.Repeat("m", 5000)
			var over atomic.Int64
			var wg sync.WaitGroup
			for w := range g {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					for range iters {
						key := keys[rng.IntN(len(keys))]
						var err error
						switch rng.IntN(8) {
						case 0, 1, 2:
							_, err = s.AllowN(key, 1+rng.IntN(3))
						case 3:
							_, err = s.AllowTier(key, multi, 1)
						case 4:
							_, err = s.AllowTier(key, def, 1)
						case 5:
							err = s.Refund(key, 1)
						case 6:
							var r keyrate.Reservation
							r, err = s.Reserve(key, 2, 100*time.Millisecond)
							if err == nil && rng.IntN(2) == 0 {
								r.Cancel()
							}
						case 7:
							if rng.IntN(20) == 0 {
								s.Sweep()
							}
							clk.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
						}
						if err != nil && !errors.Is(err, keyrate.ErrStoreFull) {
							t.Errorf("unexpected error %v", err)
						}
						if n, st := s.Len(), s.Stats(); n > capKeys || st.Keys > capKeys {
							over.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if over.Load() > 0 {
				t.Fatalf("Len or Stats.Keys read above the cap %d %d times", capKeys, over.Load())
			}
			if n, live := s.Len(), atomicbucket.LiveOf(s); n != live || s.Stats().Keys != live {
				t.Fatalf("at rest Len = %d, Stats.Keys = %d, but the tables hold %d live keys", n, s.Stats().Keys, live)
			}
			clk.Advance(time.Hour)
			s.Sweep()
			if n, live := s.Len(), atomicbucket.LiveOf(s); n != 0 || live != 0 {
				t.Fatalf("after a sweep an hour on: Len = %d, tables hold %d; want 0", n, live)
			}
			if st := s.Stats(); st.Evictions == 0 {
				t.Fatalf("Stats = %+v: nothing was evicted, the test did not churn", st)
			}
		})
	}
}

// TestMemoryBounded: a key that flips between tiers a hundred
// thousand times (each flip retires its slot and record and inserts new
// ones), and a stream of distinct keys that each fill and are swept, keep
// the tables' memory bounded: dead slots and records are dropped by the
// rebuilds their growth triggers, and a swept-out segment gives its table
// back.
func TestMemoryBounded(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	s, err := atomicbucket.New(keyrate.PerSecond(10), keyrate.WithClock(clk), keyrate.WithEvictionGrace(0),
		keyrate.WithPolicies(keyrate.Policy{Name: "other", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(100)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	empty := atomicbucket.MemoryOf(s)
	other, _ := s.Tier("other")
	def, _ := s.Tier(keyrate.DefaultPolicy)
	big := strings.Repeat("b", 1000)
	n := 30000
	if testing.Short() {
		n = 10000
	}
	peak := 0
	for i := range n {
		tier := def
		if i%2 == 1 {
			tier = other
		}
		s.AllowTier(big, tier, 1)
		if i%1000 == 0 {
			clk.Advance(time.Hour) // refilled: everything may go
			peak = max(peak, atomicbucket.MemoryOf(s))
		}
	}
	if peak > empty+64<<10 {
		t.Fatalf("one 1000-byte key flipping tiers: tables peak at %d bytes (empty store %d)", peak, empty)
	}
	for i := range n {
		s.Allow(fmt.Sprintf("stream-key-%06d", i))
		if i%500 == 499 {
			clk.Advance(time.Hour)
			s.Sweep()
			peak = max(peak, atomicbucket.MemoryOf(s))
		}
	}
	clk.Advance(time.Hour)
	s.Sweep()
	if got := atomicbucket.MemoryOf(s); got != empty {
		t.Fatalf("after every key was swept the tables hold %d bytes, an empty store %d", got, empty)
	}
	if peak > empty+500*64 {
		t.Fatalf("a stream of keys swept every 500: tables peak at %d bytes (empty store %d)", peak, empty)
	}
}
