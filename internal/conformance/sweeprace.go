package conformance

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
)

// raceLimit is the limit of the sweep race: a token every 250ms, full 1s
// after being emptied.
var raceLimit = keyrate.PerSecond(4)

// raceKeys is how many keys the sweep race spends from.
const raceKeys = 8

// SweepRace is the eviction race at the boundary. Each round, with the
// clock frozen at the very tick every key's bucket becomes full again (the
// first tick a sweep may remove it), one goroutine sweeps the store a few
// times while spenders goroutines spend from every key, passing over the
// keys again and again until the sweeps are done and then once more. The
// store enforces raceLimit on clk. A round may admit at most Burst per key
// (the bound over a window of length 0), and since the spenders keep
// trying, exactly Burst. SweepRace returns the number of (round, key) pairs
// that admitted more than Burst (a spend lost with a removed bucket:
// over-admission) and the number that admitted fewer.
func SweepRace(l keyrate.BoundedLimiter, clk *clock.Manual, rounds, spenders int) (over, under int) {
	const sweeps = 3
	fill := raceLimit.FillTime()
	keys := make([]string, raceKeys)
	for k := range keys {
		keys[k] = fmt.Sprint("race-", k)
	}
	for r := 0; r < rounds; r++ {
		var admitted [raceKeys]atomic.Int64
		var wg sync.WaitGroup
		var sweeping, swept atomic.Bool
		release := make(chan struct{})
		wg.Add(1 + spenders)
		go func() {
			defer wg.Done()
			<-release
			sweeping.Store(true)
			for i := 0; i < sweeps; i++ {
				l.Sweep()
			}
			swept.Store(true)
		}()
		for g := 0; g < spenders; g++ {
			delay := rand.IntN(4096)
			go func() {
				defer wg.Done()
				<-release
				// Start once the sweeper has, after a random delay: so that
				// in some rounds the spends start before the sweep has
				// looked at a key, in some after, and in some in between.
				for !sweeping.Load() {
					runtime.Gosched()
				}
				for i := 0; i < delay; i++ {
					if i%256 == 0 {
						runtime.Gosched()
					}
				}
				pass := func() {
					for i := range keys {
						k := (i + g) % raceKeys // spenders start on different keys
						if l.Allow(keys[k]) {
							admitted[k].Add(1)
						}
					}
				}
				for !swept.Load() {
					pass()
					runtime.Gosched() // let the sweeper run, even at GOMAXPROCS=1
				}
				for a := 0; a <= raceLimit.Burst; a++ {
					pass()
				}
			}()
		}
		close(release)
		wg.Wait()
		for k := range admitted {
			switch n := int(admitted[k].Load()); {
			case n > raceLimit.Burst:
				over++
			case n < raceLimit.Burst:
				under++
			}
		}
		// Every key was emptied at this round's tick, so it is full again,
		// exactly, at the next one.
		clk.Advance(fill)
	}
	return over, under
}

// testSweepRace runs SweepRace on s at every GOMAXPROCS of procs: the
// store must admit exactly Burst per key per round, over the whole run.
func testSweepRace(t *testing.T, s Bounded) {
	rounds := 300
	if testing.Short() || racetest.Enabled {
		rounds = 100
	}
	eachProcs(t, func(t *testing.T) {
		l, clk := openBounded(t, s, raceLimit)
		over, under := SweepRace(l, clk, rounds, 4)
		if over != 0 || under != 0 {
			t.Fatalf("over %d rounds × %d keys: %d admitted more than the burst of %d, %d fewer", rounds, raceKeys, over, raceLimit.Burst, under)
		}
		if st := l.Stats(); st.Evictions == 0 {
			t.Fatalf("Stats = %+v: no evictions, so the race was never run", st)
		}
	})
}
