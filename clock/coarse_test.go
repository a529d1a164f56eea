package clock_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/leaktest"
)

// TestCoarseNeverAheadOfSystem checks the property the package documents:
// a Coarse reading is never ahead of a System reading taken after it, and
// readings never go backwards, while the ticker is refreshing the word.
func TestCoarseNeverAheadOfSystem(t *testing.T) {
	defer leaktest.Verify(t)
	c := clock.NewCoarse(10 * time.Microsecond)
	defer c.Close()
	var last time.Duration
	for i := range 200_000 {
		got := c.Now()
		sys := clock.System().Now()
		if got > sys {
			t.Fatalf("read %d: Coarse.Now() = %v is ahead of System().Now() = %v", i, got, sys)
		}
		if got < last {
			t.Fatalf("read %d: Coarse.Now() = %v went back from %v", i, got, last)
		}
		last = got
	}
}

// TestCoarseAdvancesAndCloses uses real time, loosely: the reading must move
// within a generous deadline and lag by far less than a second; after Close
// the goroutine is gone (goleak) and the reading is frozen.
func TestCoarseAdvancesAndCloses(t *testing.T) {
	defer leaktest.Verify(t)
	c := clock.NewCoarse(0) // DefaultResolution
	start := c.Now()
	deadline := time.Now().Add(10 * time.Second)
	for c.Now() == start {
		if time.Now().After(deadline) {
			t.Fatal("Coarse.Now() did not advance within 10s")
		}
		runtime.Gosched()
	}
	// The coarse reading is taken first: it never runs ahead of the system
	// clock read after it. A busy machine can only make the lag look
	// longer (a goroutine descheduled between the reads), so the upper
	// bound is retried until the deadline rather than failed at once.
	for {
		coarse := c.Now()
		lag := clock.System().Now() - coarse
		if lag < 0 {
			t.Fatalf("lag = %v: the coarse clock ran ahead of the system clock", lag)
		}
		if lag <= time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag = %v, want at most 1s", lag)
		}
		runtime.Gosched()
	}
	c.Close()
	c.Close() // idempotent
	frozen := c.Now()
	for range 1000 {
		runtime.Gosched()
	}
	if got := c.Now(); got != frozen {
		t.Errorf("after Close, Now() = %v, then %v; want it frozen", frozen, got)
	}
}

// coarsen returns what a clock of resolution res that ticked at every
// multiple of res reads at exact instant s: the last tick at or before s.
func coarsen(s, res time.Duration) time.Duration { return s / res * res }

// newManualStore returns an atomicbucket store on a manual clock reading 0.
func newManualStore(t *testing.T, l keyrate.Limit) (*atomicbucket.Store, *clock.Manual) {
	t.Helper()
	m := clock.NewManual(0)
	s, err := atomicbucket.New(l, keyrate.WithClock(m))
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// TestLaggingClockBounds replays random schedules through two stores, one
// reading the exact instants and one reading them coarsened (as a Coarse
// clock of that resolution would, at worst lag), and checks the bounds the
// Coarse documentation states:
//
//   - by every instant s, the coarse store has admitted no more than
//     Burst + Rate·s/Per: the long-run limit, in real time;
//   - over every window of requests [i, j], it admitted no more than
//     Burst + Rate·(s_j − s_i + res)/Per.
func TestLaggingClockBounds(t *testing.T) {
	const res = 10 * time.Millisecond
	limits := []keyrate.Limit{
		keyrate.PerSecond(100),
		keyrate.PerSecond(1).WithBurst(3),
		keyrate.Every(7 * time.Millisecond).WithBurst(2),
		keyrate.Every(25 * time.Millisecond),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range limits {
		t.Run(l.String(), func(t *testing.T) {
			exact, exactClock := newManualStore(t, l)
			coarse, coarseClock := newManualStore(t, l)
			perNs := float64(l.Rate) / float64(l.Per)
			var now time.Duration
			var times []time.Duration // instants of the coarse store's admissions
			exactAdmitted := 0
			for i := range 3000 {
				now += time.Duration(r.ExpFloat64() * float64(l.Per) / float64(l.Rate) / 2)
				exactClock.Set(now)
				coarseClock.Set(coarsen(now, res))
				if exact.Allow("k") {
					exactAdmitted++
				}
				if coarse.Allow("k") {
					times = append(times, now)
				}
				bound := float64(l.Burst) + perNs*float64(now)
				if float64(len(times)) > bound || float64(exactAdmitted) > bound {
					t.Fatalf("request %d at %v: admitted coarse %d, exact %d; the long-run bound is %.2f",
						i, now, len(times), exactAdmitted, bound)
				}
			}
			for i := range times {
				for j := i; j < len(times); j++ {
					bound := float64(l.Burst) + perNs*float64(times[j]-times[i]+res)
					if n := float64(j - i + 1); n > bound {
						t.Fatalf("admissions %d..%d in [%v, %v]: %v, over the windowed bound %.2f",
							i, j, times[i], times[j], n, bound)
					}
				}
			}
		})
	}
}

// TestLaggingClockCanAdmitWhereExactDenies pins the short-window cost of a
// lagging clock that the Coarse documentation states: a store reading a
// lagging clock is not dominated request by request by one reading the
// exact clock. One token per 10ms, burst 1, a clock of 10ms resolution:
// requests at 9ms and 10ms read 0 and 10ms, and both are admitted; the
// exact clock admits only the first. Both stay within the long-run bound
// (2 tokens by 10ms).
func TestLaggingClockCanAdmitWhereExactDenies(t *testing.T) {
	const res = 10 * time.Millisecond
	l := keyrate.Every(10 * time.Millisecond)
	exact, exactClock := newManualStore(t, l)
	coarse, coarseClock := newManualStore(t, l)
	var got []string
	for _, at := range []time.Duration{9 * time.Millisecond, 10 * time.Millisecond} {
		exactClock.Set(at)
		coarseClock.Set(coarsen(at, res))
		got = append(got, fmt.Sprintf("%v exact=%v coarse=%v", at, exact.Allow("k"), coarse.Allow("k")))
	}
	want := []string{"9ms exact=true coarse=true", "10ms exact=false coarse=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// ExampleNewCoarse shows a store reading a coarse clock. The clock must be
// closed when no store uses it any more.
func ExampleNewCoarse() {
	c := clock.NewCoarse(time.Millisecond)
	defer c.Close()
	s, err := atomicbucket.New(keyrate.PerSecond(2), keyrate.WithClock(c))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Allow("alice"), s.Allow("alice"), s.Allow("alice"))
	fmt.Println(c.Now() <= clock.System().Now())
	// Output:
	// true true false
	// true
}
