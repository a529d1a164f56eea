package rules_test

import (
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// Rule is the arithmetic every store shares; a store only synchronises
// calls to Take on one word.
func ExampleRule_Take() {
	p, _ := rules.NewRule(keyrate.PerSecond(2), clock.NewManual(0))
	var s rules.State // the zero State is a full bucket
	now := p.Now()
	for i := 0; i < 3; i++ {
		var ok bool
		s, ok = p.Take(s, now, 1)
		fmt.Println(ok, p.Tokens(s, now))
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

// Rules enforces a policy's limits at once, all or nothing: here at most
// 2 a second, and 3 a minute. It is the arithmetic the stores share; a
// store keeps a key's states, one per window.
func ExampleRules_Take() {
	clk := clock.NewManual(0)
	p := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{
		keyrate.PerSecond(2),
		keyrate.PerMinute(3),
	}}
	rs, err := rules.NewRules(p, clk)
	if err != nil {
		panic(err)
	}
	s := make([]rules.State, rs.Len()) // a new key: every window full
	for _, at := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		clk.Set(at)
		now := rs.Now()
		d := rs.Decide(s, now, 1, rs.Take(s, now, 1))
		fmt.Printf("%v: allowed=%v window=%d (%v) remaining=%d retry-after=%v\n",
			at, d.Allowed, d.Window, d.Limit, d.Remaining, d.RetryAfter)
	}
	// Output:
	// 0s: allowed=true window=0 (2 per 1s, burst 2) remaining=1 retry-after=0s
	// 0s: allowed=true window=0 (2 per 1s, burst 2) remaining=0 retry-after=0s
	// 0s: allowed=false window=0 (2 per 1s, burst 2) remaining=0 retry-after=500ms
	// 1s: allowed=true window=1 (3 per 1m0s, burst 3) remaining=0 retry-after=0s
	// 2s: allowed=false window=1 (3 per 1m0s, burst 3) remaining=0 retry-after=18s
}

// A refund gives back what a request spent, for instance when the work it
// paid for was never done: the key is then as if the request had not been
// made.
func ExampleRules_Refund() {
	clk := clock.NewManual(0)
	rs, _ := rules.NewRules(keyrate.Policy{Name: "api", Limits: []keyrate.Limit{keyrate.PerMinute(10)}}, clk)
	s := make([]rules.State, rs.Len())
	now := clk.Now()
	d := rs.Decide(s, now, 4, rs.Take(s, now, 4))
	fmt.Println("spent 4:", d.Remaining, "left")
	rs.Refund(s, now, 4) // the upstream call failed: give the 4 back
	fmt.Println("refunded 4:", rs.Peek(s, now).Remaining, "left")
	rs.Refund(s, now, 4) // never above the burst
	fmt.Println("refunded 4 more:", rs.Peek(s, now).Remaining, "left")
	// Output:
	// spent 4: 6 left
	// refunded 4: 10 left
	// refunded 4 more: 10 left
}
