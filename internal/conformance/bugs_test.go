package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// Review7's bugs, each a failing test until fixed.

// A key's state carried to a faster token bucket at a reading older than
// its last spend mints tokens (see TestCarryAtStaleReadingMintsNothing):
// the stores now carry at a reading taken after the old state is retired,
// which is no older than the spend for a clock that never steps back, but
// a clock stepped back still mints. A key that spent its burst under a
// slow default, carried to a faster one at a reading a second before that
// spend, spends its burst again at the instant of the first. The package
// documentation: "a clock stepped backwards likewise only denies more
// until it catches up".
func TestBugStaleCarryToFasterRateMintsClockBack(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, slowFast[0].Limits[0])
			clk.Set(1500 * time.Millisecond)
			if d, _ := l.AllowN("k", 10); !d.Allowed {
				t.Fatal("burst denied")
			}
			if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: slowFast[1].Limits}); err != nil {
				t.Fatal(err)
			}
			clk.Set(500 * time.Millisecond) // stepped back a second
			if d, _ := l.AllowN("k", 1); d.Allowed {
				t.Fatal("allowed at a reading a second before the burst was spent")
			}
			clk.Set(1500 * time.Millisecond) // the instant of the burst again
			admitted := 0
			for range 10 {
				if d, _ := l.AllowN("k", 1); d.Allowed {
					admitted++
				}
			}
			if admitted > 0 {
				t.Fatalf("at the instant its burst of 10 was spent the key spent %d more (burst 10)", admitted)
			}
		})
	}
}
