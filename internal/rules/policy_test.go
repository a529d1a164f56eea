package rules_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// checkErr fails t unless err wraps every one of want and its message
// contains every one of has: the values it names.
func checkErr(t *testing.T, what string, err error, want []error, has ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil, want an error wrapping %v", what, want)
		return
	}
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("%s = %q, does not wrap %v", what, err, w)
		}
	}
	for _, h := range has {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("%s = %q, does not name %q", what, err, h)
		}
	}
}

var (
	invalidPolicy = []error{keyrate.ErrInvalidPolicy}
	invalidWindow = []error{keyrate.ErrInvalidPolicy, keyrate.ErrInvalidLimit}
)

// TestPolicyValidate: every invalid policy is reported by Validate and by
// NewRules, with an error wrapping ErrInvalidPolicy that names the value.
func TestPolicyValidate(t *testing.T) {
	nine := make([]keyrate.Limit, keyrate.MaxLimits+1)
	for i := range nine {
		nine[i] = keyrate.PerSecond(i + 1)
	}
	for _, c := range []struct {
		name   string
		policy keyrate.Policy
		want   []error // nil: valid
		has    []string
	}{
		{"one window", keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10)}}, nil, nil},
		{"MaxLimits windows", keyrate.Policy{Name: "pro", Limits: nine[:keyrate.MaxLimits]}, nil, nil},
		{"unlimited", keyrate.Unlimited("free"), nil, nil},
		{"empty name", keyrate.Policy{Limits: []keyrate.Limit{keyrate.PerSecond(10)}}, invalidPolicy, []string{"name is empty"}},
		{"empty name, unlimited", keyrate.Unlimited(""), invalidPolicy, []string{"name is empty"}},
		{"no limits", keyrate.Policy{Name: "pro"}, invalidPolicy, []string{`"pro"`, "no limits"}},
		{"empty limits", keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{}}, invalidPolicy, []string{`"pro"`, "no limits"}},
		{"9 limits", keyrate.Policy{Name: "pro", Limits: nine}, invalidPolicy, []string{`"pro"`, "9 limits", "most of 8"}},
		{"invalid rate", keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), {Rate: 0, Per: time.Second, Burst: 1}}},
			invalidWindow, []string{`"pro"`, "window 1", "Rate 0 is below 1"}},
		{"invalid burst", keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10).WithBurst(0)}},
			invalidWindow, []string{`"pro"`, "window 0", "Burst 0 is below 1"}},
		{"too fast", keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(5), keyrate.PerSecond(999_999_937)}},
			invalidWindow, []string{`"pro"`, "window 2", "999999937", "too fast"}},
		{"unlimited with limits", keyrate.Policy{Name: "free", Unlimited: true, Limits: []keyrate.Limit{keyrate.PerSecond(1)}},
			invalidPolicy, []string{`"free"`, "unlimited", "1 limits"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.policy.Validate()
			_, errNew := rules.NewRules(c.policy, clock.NewManual(0))
			if c.want == nil {
				if err != nil || errNew != nil {
					t.Errorf("%v: Validate() = %v, NewRules: %v; want nil", c.policy, err, errNew)
				}
				return
			}
			checkErr(t, "Validate()", err, c.want, c.has...)
			checkErr(t, "NewRules", errNew, c.want, c.has...)
		})
	}
}

func TestPolicyString(t *testing.T) {
	for _, c := range []struct {
		p    keyrate.Policy
		want string
	}{
		{keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(1000)}},
			`"pro": 10 per 1s, burst 10; 1000 per 1h0m0s, burst 1000`},
		{keyrate.Policy{Name: "one", Limits: []keyrate.Limit{keyrate.Every(2 * time.Second)}}, `"one": 1 per 2s, burst 1`},
		{keyrate.Unlimited("free"), `"free": unlimited`},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() = %s, want %s", got, c.want)
		}
	}
}

// TestRulesCheckCost: a cost below 1, or above the smallest Burst of the
// policy's windows, can never be allowed, and the error names it.
func TestRulesCheckCost(t *testing.T) {
	two, err := rules.NewRules(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{
		keyrate.PerMinute(100), keyrate.PerSecond(10).WithBurst(7), keyrate.PerHour(1000),
	}}, clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	one, err := rules.NewRules(keyrate.Policy{Name: "one", Limits: []keyrate.Limit{keyrate.PerSecond(5)}}, clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	free, err := rules.NewRules(keyrate.Unlimited("free"), clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rs   *rules.Rules
		cost int
		want error
		has  []string
	}{
		{two, 1, nil, nil},
		{two, 7, nil, nil},
		{two, 0, keyrate.ErrInvalidCost, []string{"cost 0 is below 1"}},
		{two, -3, keyrate.ErrInvalidCost, []string{"cost -3 is below 1"}},
		{two, 8, keyrate.ErrCostExceedsBurst, []string{"cost 8", "burst of 7", `"pro"`}},
		{two, math.MaxInt, keyrate.ErrCostExceedsBurst, []string{"burst of 7"}},
		{one, 5, nil, nil},
		{one, 6, keyrate.ErrCostExceedsBurst, []string{"cost 6 is above the burst of 5"}},
		{free, 1_000_000, nil, nil},
		{free, 0, keyrate.ErrInvalidCost, []string{"cost 0 is below 1"}},
	} {
		err := c.rs.CheckCost(c.cost)
		what := fmt.Sprintf("%s.CheckCost(%d)", c.rs.Name(), c.cost)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s = %v, want nil", what, err)
			}
			continue
		}
		checkErr(t, what, err, []error{c.want}, c.has...)
	}
}

// TestRulesUnlimited: an unlimited policy admits everything, stores
// nothing and decides with math.MaxInt remaining, the zero Limit and its
// name.
func TestRulesUnlimited(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	rs, err := rules.NewRules(keyrate.Unlimited("free"), clk)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Unlimited() || rs.Len() != 0 || rs.Name() != "free" {
		t.Fatalf("Unlimited() = %v, Len() = %d, Name() = %q; want true, 0, free", rs.Unlimited(), rs.Len(), rs.Name())
	}
	if p := rs.Policy(); p.Name != "free" || !p.Unlimited || len(p.Limits) != 0 {
		t.Errorf("Policy() = %v", p)
	}
	want := keyrate.Decision{Allowed: true, Policy: "free", Remaining: math.MaxInt}
	var s []rules.State
	for i, cost := range []int{1, 1000, math.MaxInt} {
		t0 := clk.Now()
		denied := rs.Take(s, t0, cost)
		if denied != -1 {
			t.Errorf("step %d: Take(cost %d) = %d, want -1", i, cost, denied)
		}
		if got := rs.Decide(s, t0, cost, denied); got != want {
			t.Errorf("step %d: Decide(cost %d) = %s, want %s", i, cost, fmtDecision(got), fmtDecision(want))
		}
		if got := rs.Peek(s, t0); got != want {
			t.Errorf("step %d: Peek() = %s, want %s", i, fmtDecision(got), fmtDecision(want))
		}
		rs.Refund(s, t0, cost)
		if !rs.Full(s, t0) {
			t.Errorf("step %d: Full() = false", i)
		}
		clk.Advance(time.Second)
	}
	if got := rs.UnlimitedDecision(); got != want {
		t.Errorf("UnlimitedDecision() = %s, want %s", fmtDecision(got), fmtDecision(want))
	}
	// Its reservations are made at the store's reading (issue 31: At()
	// was 0).
	if got := rs.Now(); got != clk.Now() || rs.Clock() != clock.Clock(clk) {
		t.Errorf("Now() = %v, want the clock's %v", got, clk.Now())
	}
}

// TestRulesPolicyIsACopy: NewRules keeps its own copy of the policy's
// limits, and Policy returns a copy.
func TestRulesPolicyIsACopy(t *testing.T) {
	limits := []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(20)}
	rs, err := rules.NewRules(keyrate.Policy{Name: "pro", Limits: limits}, clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	limits[0] = keyrate.PerSecond(1)
	p := rs.Policy()
	p.Limits[1] = keyrate.PerSecond(1)
	want := `"pro": 10 per 1s, burst 10; 20 per 1m0s, burst 20`
	if got := rs.Policy().String(); got != want {
		t.Errorf("Policy() = %s after changing the caller's slices, want %s", got, want)
	}
	if got := rs.Rule(1).Limit(); got != keyrate.PerMinute(20) {
		t.Errorf("Rule(1).Limit() = %v, want 20 per minute", got)
	}
	d := rs.Peek(make([]rules.State, rs.Len()), 0)
	if d.Limit != keyrate.PerSecond(10) || d.Policy != "pro" {
		t.Errorf("Peek() = %s, want window 0's limit, 10 per second", fmtDecision(d))
	}
}

// TestRulesNow: the rules read the clock they were compiled for, from
// the epoch they were compiled at.
func TestRulesNow(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerSecond(7), keyrate.PerSecond(10)}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if got := rs.Now(); got != time.Hour+time.Second {
		t.Errorf("Now() = %v, want 1h0m1s", got)
	}
	// Scales 7 and 1: a second after the epoch is 7e9 and 1e9 ticks.
	if a, b := rs.Rule(0).Ticks(rs.Now()), rs.Rule(1).Ticks(rs.Now()); a != 7_000_000_000 || b != 1_000_000_000 {
		t.Errorf("window ticks a second after the epoch = %d, %d; want 7e9, 1e9", a, b)
	}
}
