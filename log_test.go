package keyrate

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
)

// logRules compiles a one-window policy of limit l on clk.
func logRules(t *testing.T, l Limit, clk clock.Clock) *Rules {
	t.Helper()
	rs, err := NewRules(Policy{Name: "p", Limits: []Limit{l}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestLogCarry checks a change of policy to and from a log by hand-worked
// cases: a bucket's debt becomes one admission leaving the log's window no
// earlier than the bucket would have been full; a log's cost in the window
// becomes the new limit's debt; a log into a smaller log keeps its cost,
// capped, on its newest admission.
func TestLogCarry(t *testing.T) {
	clk := clock.NewManual(0)
	log10 := logRules(t, PerSecond(10).Using(SlidingLog), clk)
	var s, into [MaxLimits]State
	peek := func(rs *Rules, st []State, at time.Duration) Decision {
		t.Helper()
		return rs.Peek(st[:rs.Len()], at)
	}

	// A token bucket of 1 every 10s, burst 10, emptied at 0: full at 100s.
	slow := logRules(t, Limit{Rate: 1, Per: 10 * time.Second, Burst: 10}, clk)
	slow.FullStates(0, s[:1])
	if slow.Take(s[:1], 0, 10) >= 0 {
		t.Fatal("the bucket's burst was denied")
	}
	log10.Carry(slow, s[:1], 0, into[:LogWords])
	if d := peek(log10, into[:], 100*time.Second-1); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("bucket → log, 1ns before the bucket is full: %+v, want denied, retry after 1ns", d)
	}
	if d := peek(log10, into[:], 100*time.Second); !d.Allowed || d.Remaining != 10 {
		t.Fatalf("bucket → log, when the bucket is full: %+v, want 10 left", d)
	}

	// A log spending 6 at 0.5s, carried at 0.7s into a token bucket of 10
	// a second: 6 owed from 0.7s, so 4 left then, and full at 1.3s.
	log10.FullStates(0, s[:LogWords])
	if log10.Take(s[:LogWords], 500*time.Millisecond, 6) >= 0 {
		t.Fatal("the log's 6 were denied")
	}
	bucket := logRules(t, PerSecond(10), clk)
	bucket.Carry(log10, s[:LogWords], 700*time.Millisecond, into[:1])
	if d := peek(bucket, into[:], 700*time.Millisecond); d.Remaining != 4 || d.ResetAfter != 600*time.Millisecond {
		t.Fatalf("log → bucket: %+v, want 4 left, full in 600ms", d)
	}

	// The same log into a log of 5 a second: 5 (capped) until 1.5s.
	log5 := logRules(t, PerSecond(5).Using(SlidingLog), clk)
	log5.Carry(log10, s[:LogWords], 700*time.Millisecond, into[:LogWords])
	if d := peek(log5, into[:], 1500*time.Millisecond-1); d.Allowed || d.Remaining != 0 {
		t.Fatalf("log → smaller log before 1.5s: %+v, want none left", d)
	}
	if d := peek(log5, into[:], 1500*time.Millisecond); d.Remaining != 5 {
		t.Fatalf("log → smaller log at 1.5s: %+v, want 5 left", d)
	}
}

// TestLogPolicyBounds checks the log's limits and policies: N up to
// MaxLogRate, Burst equal to Rate, and no other window beside it.
func TestLogPolicyBounds(t *testing.T) {
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
