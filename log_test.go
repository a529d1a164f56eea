package keyrate

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate/internal/tick"
)

// TestLogPolicyBounds checks the log's limits and policies: N up to
// MaxLogRate, Burst equal to Rate, and no other window beside it.
func TestLogPolicyBounds(t *testing.T) {
	if MaxLogRate != tick.MaxLogRate {
		t.Fatalf("MaxLogRate %d, but internal/tick compiles up to %d", MaxLogRate, tick.MaxLogRate)
	}
	for _, c := range []struct {
		l  Limit
		ok bool
	}{
		{PerSecond(MaxLogRate).Using(SlidingLog), true},
		{PerSecond(MaxLogRate + 1).Using(SlidingLog), false},
		{Limit{Rate: 3, Per: time.Second, Burst: 4, Algorithm: SlidingLog}, false},
		{Limit{Rate: 3, Per: 0, Burst: 3, Algorithm: SlidingLog}, false},
	} {
		if err := c.l.Validate(); (err == nil) != c.ok {
			t.Errorf("%v: Validate() = %v, want ok %v", c.l, err, c.ok)
		}
	}
	p := Policy{Name: "p", Limits: []Limit{PerSecond(3), PerSecond(3).Using(SlidingLog)}}
	if err := p.Validate(); err == nil {
		t.Errorf("%v: Validate() = nil, want a log beside another window refused", p)
	}
	if a, err := ParseAlgorithm("sliding-log"); err != nil || a != SlidingLog || a.String() != "sliding-log" || a.Windowed() {
		t.Errorf(`ParseAlgorithm("sliding-log") = %v, %v`, a, err)
	}
}
