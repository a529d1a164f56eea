package rules_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// logRules compiles a one-window policy of limit l on clk.
func logRules(t *testing.T, l keyrate.Limit, clk clock.Clock) *rules.Rules {
	t.Helper()
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{l}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestLogCarry checks a change of policy to and from a log by hand-worked
// cases (docs/design/carry.md): a bucket's debt becomes one admission at
// the carry, which stays in the log's window until ⌈debt/N⌉ windows have
// passed; a log's cost in the window becomes the new limit's debt; a log
// into a smaller log owes its whole cost, N a window.
func TestLogCarry(t *testing.T) {
	clk := clock.NewManual(0)
	log10 := logRules(t, keyrate.PerSecond(10).Using(keyrate.SlidingLog), clk)
	var s, into [keyrate.MaxLimits]rules.State
	peek := func(rs *rules.Rules, st []rules.State, at time.Duration) keyrate.Decision {
		t.Helper()
		return rs.Peek(st[:rs.Len()], at)
	}

	// A token bucket of 1 every 10s, burst 10, emptied at 0: it owes 10,
	// which the log of 10 a second counts as spent at 0, until 1s.
	slow := logRules(t, keyrate.Limit{Rate: 1, Per: 10 * time.Second, Burst: 10}, clk)
	slow.FullStates(0, s[:1])
	if slow.Take(s[:1], 0, 10) >= 0 {
		t.Fatal("the bucket's burst was denied")
	}
	log10.Carry(slow, s[:1], 0, into[:rules.LogWords])
	if d := peek(log10, into[:], time.Second-1); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("bucket → log, 1ns before the debt leaves the window: %+v, want denied, retry after 1ns", d)
	}
	if d := peek(log10, into[:], time.Second); !d.Allowed || d.Remaining != 10 {
		t.Fatalf("bucket → log, when the debt leaves the window: %+v, want 10 left", d)
	}

	// A log spending 6 at 0.5s, carried at 0.7s into a token bucket of 10
	// a second: 6 owed from 0.7s, so 4 left then, and full at 1.3s.
	log10.FullStates(0, s[:rules.LogWords])
	if log10.Take(s[:rules.LogWords], 500*time.Millisecond, 6) >= 0 {
		t.Fatal("the log's 6 were denied")
	}
	bucket := logRules(t, keyrate.PerSecond(10), clk)
	bucket.Carry(log10, s[:rules.LogWords], 700*time.Millisecond, into[:1])
	if d := peek(bucket, into[:], 700*time.Millisecond); d.Remaining != 4 || d.ResetAfter != 600*time.Millisecond {
		t.Fatalf("log → bucket: %+v, want 4 left, full in 600ms", d)
	}

	// The same log into a log of 5 a second: 6 owed from 0.7s, two of its
	// windows' worth, until 2.7s.
	log5 := logRules(t, keyrate.PerSecond(5).Using(keyrate.SlidingLog), clk)
	log5.Carry(log10, s[:rules.LogWords], 700*time.Millisecond, into[:rules.LogWords])
	if d := peek(log5, into[:], 2700*time.Millisecond-1); d.Allowed || d.Remaining != 0 {
		t.Fatalf("log → smaller log before 2.7s: %+v, want none left", d)
	}
	if d := peek(log5, into[:], 2700*time.Millisecond); d.Remaining != 5 {
		t.Fatalf("log → smaller log at 2.7s: %+v, want 5 left", d)
	}
}
