package redisbucket

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// TestWindowState pins units.state, which packs a window's counts as
// keyrate does, against keyrate's own states: Encode's (no previous count)
// and Carry's of 2N (the previous window full, N in the next).
func TestWindowState(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for _, n := range []int{1, 2, 5, 1000, 100_000} {
			l := keyrate.Limit{Rate: n, Per: time.Second}.Using(alg)
			r, err := rules.NewRule(l, clock.NewManual(0))
			if err != nil {
				t.Fatal(err)
			}
			u, err := compileUnits(l)
			if err != nil {
				t.Fatal(err)
			}
			w := uint64(l.Per)
			for _, idx := range []uint64{0, 1, 7, 1 << 20} {
				for _, q := range []int{0, 1, n} {
					if got, want := u.state(idx, 0, uint64(q)), r.Encode(n-q, idx*w); got != want {
						t.Errorf("%v: state(%d, 0, %d) = %#x, want %#x", l, idx, q, got, want)
					}
				}
				if got, want := u.state(idx+1, uint64(n), uint64(n)), r.Carry(2*uint64(n), 1, idx*w); got != want {
					t.Errorf("%v: state(%d, %d, %d) = %#x, want %#x", l, idx+1, n, n, got, want)
				}
			}
		}
	}
}
