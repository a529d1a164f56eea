package striped_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/striped"
)

// TestSweepExaminesEveryKeyDespiteGrowth: Sweep must examine every
// tracked key once (keyrate.BoundedLimiter) even while other goroutines
// insert keys. striped's sweep lets go of a stripe's lock every 256 keys
// (stripe.evict, table.go); if an insertion rebuilds the stripe's slots
// meanwhile (the table grows), the sweep starts over on the new slots.
// When it gave up on the rest of the stripe instead, Sweep returned
// having examined a few hundred keys of thousands, and the full ones it
// never reached stayed.
//
// Deterministic: with one P, the inserter is started at the sweep's
// clock reading and runs only when the sweep yields at its first lock
// break (runtime.Gosched), where it inserts enough keys to grow the table.
func TestSweepExaminesEveryKeyDespiteGrowth(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	clk := conformance.NewHookClock(time.Hour)
	s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 2},
		keyrate.WithClock(clk), striped.WithStripes(1), keyrate.WithSweepInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const full = 2000
	for i := range full {
		k := fmt.Sprint("full-", i)
		s.Allow(k)
		s.Refund(k, 1) // full again: the sweep must remove it
	}
	done := make(chan struct{})
	arm := func() {
		go func() {
			defer close(done)
			for i := range 3 * full { // enough to grow the table whatever the sweep removed first
				s.Allow(fmt.Sprint("new-", i))
			}
		}()
	}
	clk.AtNextReading(arm)
	removed := s.Sweep()
	<-done
	if removed != full {
		t.Fatalf("Sweep() = %d with %d full keys: a concurrent insertion that grew the stripe's table ended the sweep of the stripe", removed, full)
	}
}
