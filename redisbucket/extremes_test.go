package redisbucket_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestExtremeLimits drives the limits at the ends of what New accepts
// through the ends of the script's clock: a bucket emptied at the latest
// time the script reads, then read with the time source set back to 0 (a
// debt of twice the longest fill time), and past the end of time. No
// Decision may carry a negative duration or a negative Remaining.
func TestExtremeLimits(t *testing.T) {
	if _, err := redisbucket.New(newClient(t, unreachable), keyrate.Limit{Rate: 1, Per: 1 << 62, Burst: 1}); !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Errorf("New(Limit{Rate: 1, Per: 1<<62, Burst: 1}) error = %v, want ErrInvalidLimit: its fill time is beyond the script's", err)
	}
	srv := server(t)
	client := newClient(t, srv.Addr())
	end := time.Duration(redisbucket.MaxMicros) * time.Microsecond
	var limits []keyrate.Limit
	for _, l := range []keyrate.Limit{
		{Rate: 1, Per: time.Duration(1<<52) * time.Microsecond, Burst: 1}, // the longest token interval at k = 1
		{Rate: 7, Per: 3 * time.Second, Burst: 1},                         // k = 7
		{Rate: 1, Per: 1001 * time.Nanosecond, Burst: 1},                  // k = 1000
		{Rate: 999_983, Per: time.Second, Burst: 1},                       // coarse
		keyrate.PerSecond(1_000_000),
	} {
		limits = append(limits, l)
		if b := redisbucket.MaxBurst(l); b != l.Burst {
			limits = append(limits, l.WithBurst(b))
		}
	}
	for _, l := range limits {
		t.Run(l.String(), func(t *testing.T) {
			clk := clock.NewManual(end)
			s := mustNew(t, client, l, redisbucket.WithTimeSource(clk),
				redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
			check := func(what string, d keyrate.Decision, err error) {
				t.Helper()
				if err != nil || d.RetryAfter < 0 || d.ResetAfter < 0 || d.Remaining < 0 || d.Remaining > l.Burst {
					t.Errorf("%s at %v: %+v, %v", what, clk.Now(), d, err)
				}
			}
			d, err := s.AllowN("k", l.Burst) // empties the bucket at the end of time
			check("AllowN(Burst)", d, err)
			if !d.Allowed || d.ResetAfter <= 0 {
				t.Fatalf("AllowN(Burst) on a new key = %+v, want allowed", d)
			}
			for _, at := range []time.Duration{0, end / 2, end, end + time.Hour, math.MaxInt64} {
				clk.Set(at)
				d, err := s.PeekContext(t.Context(), "k")
				check("Peek", d, err)
				for _, cost := range []int{1, l.Burst} {
					d, err := s.AllowN("k", cost)
					check("AllowN", d, err)
					if !d.Allowed && d.RetryAfter <= 0 {
						t.Errorf("AllowN(%d) at %v denied with RetryAfter %v, want a wait", cost, at, d.RetryAfter)
					}
				}
			}
		})
	}
}
