package keyrate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// This file checks, one test per claim, what the package documentation and
// the README promise a user about the contract, against every in-process
// store: defaults, bounds, the errors returned and what a call that
// returns one leaves behind.

// claimStore is what every in-process store is.
type claimStore interface {
	keyrate.WaitLimiter
	keyrate.BoundedLimiter
}

// claimStores builds each in-process store with opts.
var claimStores = []struct {
	name string
	new  func(keyrate.Limit, ...keyrate.Option) (claimStore, error)
}{
	{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (claimStore, error) {
		s, err := mutexbucket.New(l, o...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}},
	{"striped", func(l keyrate.Limit, o ...keyrate.Option) (claimStore, error) {
		s, err := striped.New(l, o...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}},
	{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (claimStore, error) {
		s, err := atomicbucket.New(l, o...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}},
}

// eachClaimStore runs f on each store built with limit, a manual clock at
// 0 and opts, closing it afterwards.
func eachClaimStore(t *testing.T, limit keyrate.Limit, f func(t *testing.T, s claimStore, clk *clock.Manual), opts ...keyrate.Option) {
	t.Helper()
	for _, c := range claimStores {
		t.Run("store="+c.name, func(t *testing.T) {
			clk := clock.NewManual(0)
			s, err := c.new(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
			if err != nil {
				t.Fatalf("New(%v): %v", limit, err)
			}
			defer s.Close()
			f(t, s, clk)
		})
	}
}

// "PerSecond returns a limit of n tokens per second with a burst of n", and
// likewise PerMinute, PerHour; "Every returns a limit of one token every d
// with a burst of 1"; "WithBurst returns a copy of l with its Burst set to b".
func TestClaimLimitConstructors(t *testing.T) {
	for _, c := range []struct {
		got, want keyrate.Limit
	}{
		{keyrate.PerSecond(7), keyrate.Limit{Rate: 7, Per: time.Second, Burst: 7}},
		{keyrate.PerMinute(7), keyrate.Limit{Rate: 7, Per: time.Minute, Burst: 7}},
		{keyrate.PerHour(7), keyrate.Limit{Rate: 7, Per: time.Hour, Burst: 7}},
		{keyrate.Every(3 * time.Second), keyrate.Limit{Rate: 1, Per: 3 * time.Second, Burst: 1}},
		{keyrate.PerSecond(7).WithBurst(2), keyrate.Limit{Rate: 7, Per: time.Second, Burst: 2}},
		{keyrate.PerSecond(7).WithBurst(2).Using(keyrate.FixedWindow), keyrate.Limit{Rate: 7, Per: time.Second, Burst: 7, Algorithm: keyrate.FixedWindow}},
	} {
		if c.got != c.want {
			t.Errorf("got %+v, want %+v", c.got, c.want)
		}
	}
}

// "The zero Limit is invalid" and "Validate ... returns nil, or an error
// wrapping ErrInvalidLimit that names the offending value and its bound";
// "Returned by Limit.Validate and by every store's New".
func TestClaimInvalidLimitNamesValueAndBound(t *testing.T) {
	for _, c := range []struct {
		l    keyrate.Limit
		want []string // substrings of the message
	}{
		{keyrate.Limit{}, []string{"Rate 0", "1"}},
		{keyrate.Limit{Rate: 1, Per: 0, Burst: 1}, []string{"Per 0s", "1ns"}},
		{keyrate.Limit{Rate: 1, Per: time.Second, Burst: 0}, []string{"Burst 0", "1"}},
		{keyrate.Limit{Rate: 1, Per: time.Second, Burst: -5}, []string{"Burst -5"}},
		{keyrate.Limit{Rate: 5, Per: time.Second, Burst: 7, Algorithm: keyrate.FixedWindow}, []string{"Burst 7", "Rate 5"}},
		{keyrate.Limit{Rate: 5, Per: time.Second, Burst: 5, Algorithm: 200}, []string{"Algorithm(200)", "token-bucket"}},
		{keyrate.PerSecond(1).WithBurst(math.MaxInt), []string{"Burst"}},
	} {
		err := c.l.Validate()
		if !errors.Is(err, keyrate.ErrInvalidLimit) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidLimit", c.l, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: Validate() = %q, want it to name %q", c.l, err, w)
			}
		}
		for _, s := range claimStores {
			if _, err := s.new(c.l); !errors.Is(err, keyrate.ErrInvalidLimit) {
				t.Errorf("%s: New(%+v) = %v, want ErrInvalidLimit", s.name, c.l, err)
			}
		}
	}
}

// Limit.String: "3 per 1m0s, burst 3", or "3 per 1m0s, fixed-window";
// Policy.String: `"pro": 10 per 1s, burst 10; 1000 per 1h0m0s, burst 1000`.
func TestClaimStringForms(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{keyrate.PerMinute(3).String(), "3 per 1m0s, burst 3"},
		{keyrate.PerMinute(3).Using(keyrate.FixedWindow).String(), "3 per 1m0s, fixed-window"},
		{keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(1000)}}.String(),
			`"pro": 10 per 1s, burst 10; 1000 per 1h0m0s, burst 1000`},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// The package documentation: "A limit for which no k up to 14 loses that
// little is rejected with ErrInvalidLimit: every token interval of at
// least 10 000/14 ns (about 714ns) has one, and a shorter interval only if
// its fraction of a tick rounds up by little." (It once said every inexact
// interval below 714ns was rejected.)
func TestClaimCoarseLimits(t *testing.T) {
	for _, c := range []struct {
		l  keyrate.Limit
		ok bool
	}{
		{keyrate.Limit{Rate: 10_007, Per: 7_150_000, Burst: 1}, true},              // 714.5ns a token
		{keyrate.Limit{Rate: 10_000, Per: 1_009_999, Burst: 1}, true},              // 100.9999ns: rounded up to 101, 0.0001% lost
		{keyrate.Limit{Rate: 1_999, Per: 1000 * time.Nanosecond, Burst: 1}, false}, // 0.5ns: 14% lost at best
	} {
		err := c.l.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, keyrate.ErrInvalidLimit)) {
			t.Errorf("%v: Validate() = %v, want accepted %v", c.l, err, c.ok)
		}
	}
}

// FillTime: "how long an empty bucket takes to fill in a store, rounded up
// to a whole nanosecond: a key idle that long is back to a full bucket. For
// a limit enforced exactly ... it is Burst·Per/Rate; for any other ... a
// little longer (PerSecond(17): 1.00000001s) ... Under a window algorithm
// ... 2·Per ... It is 0 for a limit that Validate rejects."
func TestClaimFillTime(t *testing.T) {
	for _, c := range []struct {
		l    keyrate.Limit
		want time.Duration
	}{
		{keyrate.PerMinute(3), time.Minute},
		{keyrate.PerMinute(3).WithBurst(1), 20 * time.Second},
		{keyrate.Limit{Rate: 3, Per: 10 * time.Nanosecond, Burst: 1}, 4 * time.Nanosecond}, // 10/3 rounded up
		{keyrate.PerMinute(3).Using(keyrate.FixedWindow), 2 * time.Minute},
		{keyrate.PerMinute(3).Using(keyrate.SlidingWindow), 2 * time.Minute},
		{keyrate.PerSecond(17), time.Second + 10}, // not exact: 17 ticks of 1s/17 rounded up
		{keyrate.Limit{}, 0},
		{keyrate.Limit{Rate: 1, Per: math.MaxInt64, Burst: 3}, 0}, // a fill time beyond the state's range
	} {
		if got := c.l.FillTime(); got != c.want {
			t.Errorf("%v: FillTime() = %v, want %v", c.l, got, c.want)
		}
	}
	// The bucket a store empties is full again at FillTime, not before.
	for _, l := range []keyrate.Limit{keyrate.PerSecond(17), keyrate.PerMinute(3), {Rate: 1_000_003, Per: time.Second, Burst: 1_000_003}, {Rate: 17, Per: time.Millisecond, Burst: 1}} {
		eachClaimStore(t, l, func(t *testing.T, s claimStore, clk *clock.Manual) {
			if d, err := s.AllowN("k", l.Burst); err != nil || !d.Allowed || d.ResetAfter != l.FillTime() {
				t.Fatalf("%v: AllowN(k, Burst) = %+v, %v; want allowed, ResetAfter %v", l, d, err, l.FillTime())
			}
			clk.Set(l.FillTime() - 1)
			if d := s.Peek("k"); d.Remaining == l.Burst {
				t.Errorf("%v: full 1ns before FillTime %v", l, l.FillTime())
			}
			clk.Set(l.FillTime())
			if d := s.Peek("k"); d.Remaining != l.Burst || d.ResetAfter != 0 {
				t.Errorf("%v: at FillTime %v, Peek = %+v, want full", l, l.FillTime(), d)
			}
		})
	}
}

// "ParseAlgorithm returns the algorithm named s (see Algorithm.String), or
// an error wrapping ErrInvalidLimit that lists the names"; "The zero
// Algorithm is TokenBucket"; Windowed is FixedWindow and SlidingWindow.
func TestClaimParseAlgorithm(t *testing.T) {
	var zero keyrate.Algorithm
	if zero != keyrate.TokenBucket {
		t.Errorf("zero Algorithm is %v, want token-bucket", zero)
	}
	for _, a := range []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog} {
		got, err := keyrate.ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", a.String(), got, err, a)
		}
		if want := a == keyrate.FixedWindow || a == keyrate.SlidingWindow; a.Windowed() != want {
			t.Errorf("%v.Windowed() = %v, want %v", a, a.Windowed(), want)
		}
	}
	_, err := keyrate.ParseAlgorithm("leaky-bucket")
	if !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Fatalf("ParseAlgorithm(leaky-bucket) = %v, want ErrInvalidLimit", err)
	}
	for _, name := range []string{"leaky-bucket", "token-bucket", "fixed-window", "sliding-window", "sliding-log"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("ParseAlgorithm's error %q does not name %q", err, name)
		}
	}
}

// "ErrInvalidCost (cost < 1), ErrCostExceedsBurst (cost > Burst) ... A call
// that returns an error spends and stores nothing"; "Allow returns false
// where AllowN would return an error"; errors "name the value and the
// bound".
func TestClaimCostErrorsSpendAndStoreNothing(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(3), func(t *testing.T, s claimStore, _ *clock.Manual) {
		for _, c := range []struct {
			cost int
			want error
			msg  []string
		}{
			{0, keyrate.ErrInvalidCost, []string{"0"}},
			{-1, keyrate.ErrInvalidCost, []string{"-1"}},
			{math.MinInt, keyrate.ErrInvalidCost, nil},
			{4, keyrate.ErrCostExceedsBurst, []string{"4", "3"}},
			{math.MaxInt, keyrate.ErrCostExceedsBurst, []string{"3"}},
		} {
			d, err := s.AllowN("k", c.cost)
			if !errors.Is(err, c.want) || d.Allowed {
				t.Errorf("AllowN(k, %d) = %+v, %v; want not allowed and %v", c.cost, d, err, c.want)
			}
			for _, m := range c.msg {
				if err != nil && !strings.Contains(err.Error(), m) {
					t.Errorf("AllowN(k, %d): %q does not name %q", c.cost, err, m)
				}
			}
			if d.RetryAfter < 0 || d.ResetAfter < 0 {
				t.Errorf("AllowN(k, %d) = %+v: a negative duration", c.cost, d)
			}
			if _, err := s.Reserve("k", c.cost, time.Hour); !errors.Is(err, c.want) {
				t.Errorf("Reserve(k, %d) = %v, want %v", c.cost, err, c.want)
			}
			if err := s.Wait(context.Background(), "k", c.cost); !errors.Is(err, c.want) {
				t.Errorf("Wait(k, %d) = %v, want %v", c.cost, err, c.want)
			}
		}
		if n := s.Len(); n != 0 {
			t.Errorf("after calls that all returned errors, Len() = %d, want 0: they stored a key", n)
		}
		if d := s.Peek("k"); d.Remaining != 3 || !d.Allowed {
			t.Errorf("Peek(k) = %+v, want a full bucket (3): an erroring call spent", d)
		}
	})
}

// WithMaxKeys: "AllowN returns an error wrapping ErrStoreFull (naming the
// cap), Allow returns false, nothing is spent or stored, and Stats counts
// it in Refused. Keys already tracked are served normally."
func TestClaimStoreFullFailsClosed(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(3), func(t *testing.T, s claimStore, _ *clock.Manual) {
		if !s.Allow("a") || !s.Allow("b") {
			t.Fatal("first requests of two keys denied")
		}
		if s.Allow("c") {
			t.Fatal("Allow(c) on a store full of non-full keys = true, want false")
		}
		_, err := s.AllowN("c", 1)
		if !errors.Is(err, keyrate.ErrStoreFull) || !strings.Contains(err.Error(), "2") {
			t.Fatalf("AllowN(c) = %v, want ErrStoreFull naming the cap 2", err)
		}
		if _, err := s.Reserve("c", 1, time.Hour); !errors.Is(err, keyrate.ErrStoreFull) {
			t.Errorf("Reserve(c) = %v, want ErrStoreFull", err)
		}
		if st := s.Stats(); st.Keys != 2 || st.Refused < 2 || s.Len() != 2 {
			t.Errorf("Stats() = %+v, Len() = %d; want 2 keys and at least 2 refused", st, s.Len())
		}
		if !s.Allow("a") {
			t.Error("a tracked key was denied while the store was full")
		}
	}, keyrate.WithMaxKeys(2))
}

// "Peek ... An unknown key reports a full bucket and is not stored";
// "RetryAfter is 0 when Allowed"; "ResetAfter ... 0 when all are full".
func TestClaimPeekUnknownKey(t *testing.T) {
	eachClaimStore(t, keyrate.PerMinute(3), func(t *testing.T, s claimStore, _ *clock.Manual) {
		d := s.Peek("nobody")
		if !d.Allowed || d.Remaining != 3 || d.RetryAfter != 0 || d.ResetAfter != 0 || d.Policy != keyrate.DefaultPolicy || d.Limit != keyrate.PerMinute(3) {
			t.Errorf("Peek(unknown) = %+v, want allowed, 3 remaining, no waits, default policy", d)
		}
		if s.Len() != 0 {
			t.Errorf("Peek stored its key: Len() = %d", s.Len())
		}
	})
}

// "Exact refill: ... PerMinute(3) at saturation admits 3, then one every
// 20 s, forever, with no drift"; RetryAfter is "the time until every window
// will hold the requested cost".
func TestClaimPerMinute3Exact(t *testing.T) {
	eachClaimStore(t, keyrate.PerMinute(3), func(t *testing.T, s claimStore, clk *clock.Manual) {
		for i := range 3 {
			if !s.Allow("k") {
				t.Fatalf("request %d of a full bucket of 3 denied", i)
			}
		}
		d, _ := s.AllowN("k", 1)
		if d.Allowed || d.RetryAfter != 20*time.Second || d.ResetAfter != time.Minute {
			t.Fatalf("fourth request = %+v, want denied, RetryAfter 20s, ResetAfter 1m", d)
		}
		for i := range 1000 {
			clk.Advance(20*time.Second - 1)
			if s.Allow("k") {
				t.Fatalf("step %d: allowed 1ns before the token", i)
			}
			clk.Advance(1)
			if !s.Allow("k") {
				t.Fatalf("step %d: denied at the token's instant", i)
			}
		}
	})
}

// Unlimited: "admits every request, stores nothing"; Decision.Limit "is the
// zero Limit under an unlimited policy", Remaining "is math.MaxInt".
func TestClaimUnlimitedPolicy(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		tier, err := s.Tier("internal")
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			d, err := s.AllowTier("k", tier, 1)
			if err != nil || !d.Allowed || d.Remaining != math.MaxInt || d.Limit != (keyrate.Limit{}) || d.Policy != "internal" {
				t.Fatalf("AllowTier(unlimited) = %+v, %v", d, err)
			}
		}
		if s.Len() != 0 {
			t.Errorf("an unlimited policy stored its key: Len() = %d", s.Len())
		}
	}, keyrate.WithPolicies(keyrate.Unlimited("internal")))
}

// "The zero Tier is the default policy"; Tier names an unknown policy in
// ErrUnknownPolicy; "A Tier is valid only for the store that returned it",
// AllowTier "returns an error wrapping ErrUnknownPolicy for a Tier of
// another store"; Tier.Name.
func TestClaimTiers(t *testing.T) {
	other, err := mutexbucket.New(keyrate.PerSecond(1), keyrate.WithPolicies(keyrate.Unlimited("free")))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	foreign, err := other.Tier("free")
	if err != nil {
		t.Fatal(err)
	}
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		d, err := s.AllowTier("k", keyrate.Tier{}, 1)
		if err != nil || d.Policy != keyrate.DefaultPolicy || !d.Allowed {
			t.Errorf("AllowTier(zero Tier) = %+v, %v; want the default policy", d, err)
		}
		if _, err := s.Tier("gold"); !errors.Is(err, keyrate.ErrUnknownPolicy) || !strings.Contains(err.Error(), "gold") {
			t.Errorf("Tier(gold) = %v, want ErrUnknownPolicy naming it", err)
		}
		free, err := s.Tier("free")
		if err != nil || free.Name() != "free" {
			t.Fatalf("Tier(free) = %v (%q), %v", free, free.Name(), err)
		}
		if d, err := s.AllowTier("k2", foreign, 1); !errors.Is(err, keyrate.ErrUnknownPolicy) || d.Allowed {
			t.Errorf("AllowTier with another store's Tier = %+v, %v; want ErrUnknownPolicy", d, err)
		}
		if err := s.RefundTier("k", foreign, 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Errorf("RefundTier with another store's Tier = %v, want ErrUnknownPolicy", err)
		}
		if _, err := s.ReserveTier("k", foreign, 1, 0); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Errorf("ReserveTier with another store's Tier = %v, want ErrUnknownPolicy", err)
		}
		if s.Len() != 1 {
			t.Errorf("Len() = %d after one spend and calls with a foreign tier, want 1", s.Len())
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: "free", Limits: []keyrate.Limit{keyrate.PerSecond(1)}}))
}

// WithClock and WithObserver: "A nil c keeps the default; a typed nil ...
// makes New fail with ErrInvalidOption"; WithPolicyFunc: "a nil f is an
// error"; WithMaxKeys "at least 1"; WithSweepInterval "must be positive";
// WithEvictionGrace "must not be negative"; "a store given another store's
// option fails with ErrInvalidOption".
func TestClaimOptionMisuse(t *testing.T) {
	var manual *clock.Manual
	var coarse *clock.Coarse
	var obsFn keyrate.ObserverFunc
	for _, c := range []struct {
		name string
		opt  keyrate.Option
		ok   bool
	}{
		{"WithClock(nil)", keyrate.WithClock(nil), true},
		{"WithClock((*Manual)(nil))", keyrate.WithClock(manual), false},
		{"WithClock((*Coarse)(nil))", keyrate.WithClock(coarse), false},
		{"WithObserver(nil)", keyrate.WithObserver(nil), true},
		{"WithObserver(ObserverFunc(nil))", keyrate.WithObserver(obsFn), false},
		{"WithPolicyFunc(nil)", keyrate.WithPolicyFunc(nil), false},
		{"WithMaxKeys(0)", keyrate.WithMaxKeys(0), false},
		{"WithMaxKeys(-1)", keyrate.WithMaxKeys(-1), false},
		{"WithSweepInterval(0)", keyrate.WithSweepInterval(0), false},
		{"WithSweepInterval(-1)", keyrate.WithSweepInterval(-1), false},
		{"WithEvictionGrace(-1)", keyrate.WithEvictionGrace(-1), false},
		{"WithEvictionGrace(0)", keyrate.WithEvictionGrace(0), true},
		{"WithEvictionGrace(MaxInt64)", keyrate.WithEvictionGrace(math.MaxInt64), true},
		{"WithPolicies()", keyrate.WithPolicies(), true},
		{"nil Option", nil, true},
	} {
		for _, s := range claimStores {
			st, err := s.new(keyrate.PerSecond(1), c.opt)
			switch {
			case c.ok && err != nil:
				t.Errorf("%s: New(%s) = %v, want a store", s.name, c.name, err)
			case !c.ok && !errors.Is(err, keyrate.ErrInvalidOption):
				t.Errorf("%s: New(%s) = %v, want ErrInvalidOption", s.name, c.name, err)
			case !c.ok && !strings.Contains(err.Error(), strings.SplitN(c.name, "(", 2)[0]):
				t.Errorf("%s: New(%s) = %q, want it to name the option", s.name, c.name, err)
			}
			if st != nil {
				if !st.Allow("k") {
					t.Errorf("%s: New(%s): a fresh key denied", s.name, c.name)
				}
				st.Close()
			}
		}
	}
	for _, s := range claimStores[:2] {
		if s.name == "striped" {
			continue
		}
		if _, err := s.new(keyrate.PerSecond(1), striped.WithStripes(4)); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("%s: New(striped.WithStripes(4)) = %v, want ErrInvalidOption", s.name, err)
		}
	}
}

// WithPolicies: "A policy named DefaultPolicy replaces the default" and New
// "returns an error wrapping ErrInvalidPolicy for an invalid one or a
// repeated name"; Policy.Validate: "an empty name, no limits or more than
// MaxLimits, an invalid window (the error then wraps ErrInvalidLimit too),
// limits on an unlimited policy".
func TestClaimPolicyValidation(t *testing.T) {
	nine := make([]keyrate.Limit, keyrate.MaxLimits+1)
	for i := range nine {
		nine[i] = keyrate.PerSecond(i + 1)
	}
	for _, c := range []struct {
		name  string
		ps    []keyrate.Policy
		limit bool // the error wraps ErrInvalidLimit too
		msg   string
	}{
		{"empty name", []keyrate.Policy{{Limits: []keyrate.Limit{keyrate.PerSecond(1)}}}, false, ""},
		{"no limits", []keyrate.Policy{{Name: "p"}}, false, "p"},
		{"too many limits", []keyrate.Policy{{Name: "p", Limits: nine}}, false, "8"},
		{"invalid window", []keyrate.Policy{{Name: "p", Limits: []keyrate.Limit{{}}}}, true, "p"},
		{"unlimited with limits", []keyrate.Policy{{Name: "p", Unlimited: true, Limits: []keyrate.Limit{keyrate.PerSecond(1)}}}, false, "p"},
		{"repeated name", []keyrate.Policy{keyrate.Unlimited("p"), keyrate.Unlimited("p")}, false, "p"},
	} {
		for _, s := range claimStores {
			_, err := s.new(keyrate.PerSecond(1), keyrate.WithPolicies(c.ps...))
			if !errors.Is(err, keyrate.ErrInvalidPolicy) || errors.Is(err, keyrate.ErrInvalidLimit) != c.limit || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: New with %s = %v, want ErrInvalidPolicy (and ErrInvalidLimit: %v) naming %q", s.name, c.name, err, c.limit, c.msg)
			}
		}
	}
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		if d, err := s.AllowN("k", 5); err != nil || !d.Allowed || d.Limit != keyrate.PerSecond(5) {
			t.Errorf("AllowN(k, 5) under a replaced default of 5/s = %+v, %v", d, err)
		}
		before := s.Policies()
		if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy}); !errors.Is(err, keyrate.ErrInvalidPolicy) {
			t.Errorf("SetPolicy(no limits) = %v, want ErrInvalidPolicy", err)
		}
		if after := s.Policies(); len(after) != len(before) || after[0].Limits[0] != keyrate.PerSecond(5) {
			t.Errorf("an invalid SetPolicy changed the policies: %v, then %v", before, after)
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(5)}}))
}

// Refund: "A key the store does not track is full and gains nothing. It
// returns an error wrapping ErrInvalidCost for cost < 1 and
// ErrCostExceedsBurst for a cost above the smallest Burst"; "exact: a
// refund of what a request spent ... leaves the key as if the request had
// not been made".
func TestClaimRefund(t *testing.T) {
	eachClaimStore(t, keyrate.PerMinute(10), func(t *testing.T, s claimStore, _ *clock.Manual) {
		if err := s.Refund("k", 0); !errors.Is(err, keyrate.ErrInvalidCost) {
			t.Errorf("Refund(k, 0) = %v, want ErrInvalidCost", err)
		}
		if err := s.Refund("k", 4); !errors.Is(err, keyrate.ErrCostExceedsBurst) || !strings.Contains(err.Error(), "3") {
			t.Errorf("Refund(k, 4) with a smallest Burst of 3 = %v, want ErrCostExceedsBurst naming 3", err)
		}
		if err := s.Refund("new", 1); err != nil {
			t.Errorf("Refund(untracked key) = %v", err)
		}
		if d := s.Peek("new"); d.Remaining != 3 {
			t.Errorf("an untracked key gained from a refund: Peek = %+v", d)
		}
		before := s.Peek("k")
		if d, err := s.AllowN("k", 2); err != nil || !d.Allowed {
			t.Fatalf("AllowN(k, 2) = %+v, %v", d, err)
		}
		if err := s.Refund("k", 2); err != nil {
			t.Fatal(err)
		}
		if after := s.Peek("k"); after != before {
			t.Errorf("spend 2 then refund 2: Peek = %+v, want %+v as before", after, before)
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(3), keyrate.PerMinute(10)}}))
}

// Reserve: "A maxWait of 0 or less reserves only what is there now: it is
// AllowN"; Reservation: "Its zero value reserves nothing"; "A second Cancel,
// or one after the slot, or of a reservation that is not OK, gives back
// nothing"; Reservation.Wait: "for the zero Reservation, an error saying
// so", and for one not OK an error wrapping ErrWaitExceedsDeadline.
func TestClaimReservations(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		var zero keyrate.Reservation
		if zero.OK() || zero.Cancel() || s.Cancel(zero) || zero.Cost() != 0 || zero.Delay() != 0 {
			t.Errorf("zero Reservation: OK %v, Cancel reserved something, Cost %d, Delay %v", zero.OK(), zero.Cost(), zero.Delay())
		}
		if err := zero.Wait(context.Background()); err == nil {
			t.Error("zero Reservation's Wait = nil, want an error saying so")
		}
		if !s.Allow("k") {
			t.Fatal("first request denied")
		}
		for _, maxWait := range []time.Duration{0, -time.Hour, math.MinInt64} {
			r, err := s.Reserve("k", 1, maxWait)
			if err != nil || r.OK() || r.Delay() != time.Second {
				t.Errorf("Reserve(k, 1, %v) on an empty bucket = OK %v, Delay %v, %v; want not OK, Delay 1s", maxWait, r.OK(), r.Delay(), err)
			}
			if r.Cancel() {
				t.Error("Cancel of a reservation that is not OK gave something back")
			}
			if err := r.Wait(context.Background()); !errors.Is(err, keyrate.ErrWaitExceedsDeadline) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait of a reservation that is not OK = %v, want ErrWaitExceedsDeadline", err)
			}
		}
		r, err := s.Reserve("k", 1, time.Second)
		if err != nil || !r.OK() || r.Delay() != time.Second || r.At() != time.Second || r.Key() != "k" || r.Cost() != 1 {
			t.Fatalf("Reserve(k, 1, 1s) = %+v, %v; want its slot at 1s", r, err)
		}
		if r.DelayFrom(2*time.Second) != 0 {
			t.Errorf("DelayFrom past the slot = %v, want 0", r.DelayFrom(2*time.Second))
		}
		if !r.Cancel() || r.Cancel() || s.Cancel(r) {
			t.Error("Cancel of the latest reservation, twice and through the store: want true, false, false")
		}
		r, _ = s.Reserve("k", 1, time.Second)
		clk.Advance(time.Second)
		if r.Cancel() {
			t.Error("Cancel at the slot gave the tokens back")
		}
		// The slot has come: the reservation's token is used, so the bucket is
		// empty now.
		if s.Allow("k") {
			t.Error("allowed at the slot of a reservation whose Cancel failed")
		}
	})
}

// Wait: "returns at once, having spent nothing, with ... ctx.Err() if ctx
// is done, and an error wrapping both ErrWaitExceedsDeadline and
// context.DeadlineExceeded if the wait would end after ctx's deadline";
// "It creates no timer when no wait is needed".
func TestClaimWaitReturnsAtOnce(t *testing.T) {
	eachClaimStore(t, keyrate.PerMinute(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Wait(done, "k", 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait(done ctx) = %v, want context.Canceled", err)
		}
		if d := s.Peek("k"); d.Remaining != 1 {
			t.Errorf("Wait with a done ctx spent: %+v", d)
		}
		if err := s.Wait(context.Background(), "k", 1); err != nil {
			t.Fatalf("Wait on a full bucket = %v", err)
		}
		ctx, cancel2 := context.WithTimeout(context.Background(), time.Hour)
		defer cancel2()
		clk.Advance(time.Second) // the token is 59s away, within the hour: still use a short one
		short, cancel3 := context.WithTimeout(context.Background(), time.Second)
		defer cancel3()
		err := s.Wait(short, "k", 1)
		if !errors.Is(err, keyrate.ErrWaitExceedsDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait needing 59s with 1s left = %v, want ErrWaitExceedsDeadline and DeadlineExceeded", err)
		}
		if r, _ := s.Reserve("k", 1, 0); r.Delay() != 59*time.Second {
			t.Errorf("after a Wait refused by its deadline, the next token is %v away, want 59s: it reserved", r.Delay())
		}
		_ = ctx
	})
}

// ErrUnsupportedAlgorithm: "from New or SetPolicy (SlidingLog on
// atomicbucket; the error then wraps ErrInvalidLimit or ErrInvalidPolicy
// too), or a call the algorithm does not support (Reserve and Wait under
// SlidingLog)"; "a policy with a SlidingLog limit has no other window".
func TestClaimSlidingLogSupport(t *testing.T) {
	logLimit := keyrate.PerSecond(3).Using(keyrate.SlidingLog)
	_, err := atomicbucket.New(logLimit)
	if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) || !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Errorf("atomicbucket.New(SlidingLog) = %v, want ErrUnsupportedAlgorithm and ErrInvalidLimit", err)
	}
	a, err := atomicbucket.New(keyrate.PerSecond(1))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.SetPolicy(keyrate.Policy{Name: "log", Limits: []keyrate.Limit{logLimit}})
	if !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) || !errors.Is(err, keyrate.ErrInvalidPolicy) {
		t.Errorf("atomicbucket SetPolicy(SlidingLog) = %v, want ErrUnsupportedAlgorithm and ErrInvalidPolicy", err)
	}
	if err := (keyrate.Policy{Name: "p", Limits: []keyrate.Limit{logLimit, keyrate.PerSecond(3)}}).Validate(); !errors.Is(err, keyrate.ErrInvalidPolicy) {
		t.Errorf("a log beside another window: Validate() = %v, want ErrInvalidPolicy", err)
	}
	for _, c := range claimStores[:2] {
		s, err := c.new(logLimit)
		if err != nil {
			t.Fatalf("%s: New(SlidingLog) = %v", c.name, err)
		}
		if _, err := s.Reserve("k", 1, time.Second); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			t.Errorf("%s: Reserve under SlidingLog = %v, want ErrUnsupportedAlgorithm", c.name, err)
		}
		if err := s.Wait(context.Background(), "k", 1); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			t.Errorf("%s: Wait under SlidingLog = %v, want ErrUnsupportedAlgorithm", c.name, err)
		}
		if d := s.Peek("k"); d.Remaining != 3 {
			t.Errorf("%s: an unsupported Reserve or Wait spent: Peek = %+v", c.name, d)
		}
		s.Close()
	}
}

// Limiter: "Known keys cost no allocation" (every store's type doc; the
// README: "allocates nothing for a known key"), for Allow, AllowN, Peek,
// AllowTier, Refund and Reserve.
func TestClaimKnownKeyAllocatesNothing(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1_000_000), func(t *testing.T, s claimStore, clk *clock.Manual) {
		pro, err := s.Tier("pro")
		if err != nil {
			t.Fatal(err)
		}
		s.Allow("known")
		s.AllowTier("pro-key", pro, 1)
		for name, f := range map[string]func(){
			"Allow":     func() { s.Allow("known") },
			"AllowN":    func() { s.AllowN("known", 1) },
			"Peek":      func() { s.Peek("known") },
			"AllowTier": func() { s.AllowTier("pro-key", pro, 1) },
			"Refund":    func() { s.Refund("known", 1) },
			"Reserve":   func() { s.Reserve("known", 1, time.Second) },
		} {
			if n := testing.AllocsPerRun(100, func() { clk.Advance(time.Millisecond); f() }); n != 0 {
				t.Errorf("%s on a known key: %v allocations, want 0", name, n)
			}
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(1000), keyrate.PerHour(100_000)}}))
}

// BoundedLimiter.Close: "It is safe to call more than once and on a store
// without a sweeper, and always returns nil. The store keeps working after
// Close"; Sweep "removes the buckets that are full at the current time,
// returning how many it removed".
func TestClaimCloseAndSweep(t *testing.T) {
	for _, opts := range [][]keyrate.Option{nil, {keyrate.WithSweepInterval(time.Hour)}} {
		eachClaimStore(t, keyrate.PerSecond(2), func(t *testing.T, s claimStore, clk *clock.Manual) {
			s.Allow("a")
			s.Allow("b")
			s.Allow("b")
			for range 2 {
				if err := s.Close(); err != nil {
					t.Fatalf("Close() = %v, want nil", err)
				}
			}
			if !s.Allow("c") || s.Len() != 3 {
				t.Fatalf("after Close: Allow(c) denied or Len() = %d, want 3", s.Len())
			}
			clk.Advance(500 * time.Millisecond)
			if n := s.Sweep(); n != 2 || s.Len() != 1 {
				t.Errorf("Sweep() half a second after: removed %d, Len %d; want a and c (just refilled) gone, b kept", n, s.Len())
			}
			if st := s.Stats(); st.Evictions != 2 || st.Keys != 1 {
				t.Errorf("Stats() = %+v, want 2 evictions and 1 key", st)
			}
		}, opts...)
	}
}

// Decision: "Its durations are never negative"; a clock stepped backwards
// "can only deny more".
func TestClaimClockBackDeniesMore(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		clk.Set(time.Hour)
		if !s.Allow("k") {
			t.Fatal("first request denied")
		}
		clk.Set(0)
		d, err := s.AllowN("k", 1)
		if err != nil || d.Allowed || d.RetryAfter <= time.Hour || d.ResetAfter <= time.Hour {
			t.Errorf("an hour back after a spend: %+v, %v; want denied, waits over an hour", d, err)
		}
		p := s.Peek("k")
		if p.Allowed || p.RetryAfter < 0 || p.ResetAfter < 0 || p.WindowResetAfter < 0 {
			t.Errorf("Peek an hour back = %+v", p)
		}
		clk.Set(time.Hour + time.Second)
		if !s.Allow("k") {
			t.Error("denied once the clock caught up with the refill")
		}
	})
}

// Observer: "Observe is called ... once per call of Allow, AllowN,
// AllowTier, Reserve, ReserveTier, Wait and WaitTier"; Event.Err is the
// call's error; "For an unknown tier or policy name, it is the name asked
// for".
func TestClaimObserverEvents(t *testing.T) {
	var events []keyrate.Event
	obs := keyrate.ObserverFunc(func(e keyrate.Event) { events = append(events, e) })
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		events = events[:0]
		s.Allow("k")
		s.AllowN("k", 1)
		s.AllowN("k", 0)
		s.AllowN("bad", 1) // the policy func names "nope"
		s.Reserve("k", 1, 0)
		s.Wait(context.Background(), "w", 1)
		s.Peek("k")
		s.Refund("k", 1)
		want := []keyrate.Event{
			{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1, Allowed: true},
			{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1},
			{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 0, Err: keyrate.ErrInvalidCost},
			{Key: "bad", Policy: "nope", Cost: 1, Err: keyrate.ErrUnknownPolicy},
			{Key: "k", Policy: keyrate.DefaultPolicy, Cost: 1},
			{Key: "w", Policy: keyrate.DefaultPolicy, Cost: 1, Allowed: true},
		}
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d (one per Allow, AllowN, Reserve, Wait; none for Peek, Refund): %+v", len(events), len(want), events)
		}
		for i, w := range want {
			e := events[i]
			if e.Key != w.Key || e.Policy != w.Policy || e.Cost != w.Cost || e.Allowed != w.Allowed || !errors.Is(e.Err, w.Err) || (w.Err == nil) != (e.Err == nil) || e.Degraded || e.Shadow {
				t.Errorf("event %d = %+v, want %+v", i, e, w)
			}
		}
	}, keyrate.WithObserver(obs), keyrate.WithPolicyFunc(func(key string) string {
		if key == "bad" {
			return "nope"
		}
		return ""
	}))
}

// Wait: "If ctx is done while waiting, it cancels its reservation
// (Reservation.Cancel) and returns ctx.Err()"; it "sleeps on the store's
// clock, on the calling goroutine".
func TestClaimWaitCancelledWhileSleeping(t *testing.T) {
	eachClaimStore(t, keyrate.PerMinute(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		if !s.Allow("k") {
			t.Fatal("first request denied")
		}
		before := s.Peek("k")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Wait(ctx, "k", 1) }()
		if err := clk.AwaitSleepers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if at, ok := clk.Next(); !ok || at != time.Minute {
			t.Errorf("the waiter sleeps until %v (%v), want 1m", at, ok)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait cancelled while sleeping = %v, want context.Canceled", err)
		}
		if after := s.Peek("k"); after != before {
			t.Errorf("a cancelled Wait kept its reservation: Peek %+v, want %+v", after, before)
		}
	})
}

// Tier: "it follows the store's SetPolicy: a request made with it after a
// change is decided under the new limits"; SetPolicy "adds p"; Policies
// returns "the policies the limiter enforces now, the default included".
func TestClaimTierFollowsSetPolicy(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		pro, err := s.Tier("pro")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetPolicy(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(50)}}); err != nil {
			t.Fatal(err)
		}
		if pro.Name() != "pro" {
			t.Fatalf("Tier(pro).Name() = %q", pro.Name())
		}
		if d, err := s.AllowTier("k", pro, 30); err != nil || !d.Allowed || d.Limit != keyrate.PerSecond(50) {
			t.Errorf("AllowTier with a Tier taken before SetPolicy = %+v, %v; want decided under 50/s", d, err)
		}
		if _, err := s.Tier("new"); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Fatalf("Tier(new) before it was added = %v", err)
		}
		if err := s.SetPolicy(keyrate.Unlimited("new")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Tier("new"); err != nil {
			t.Errorf("Tier(new) after SetPolicy added it = %v", err)
		}
		names := map[string]bool{}
		for _, p := range s.Policies() {
			names[p.Name] = true
		}
		if len(names) != 3 || !names[keyrate.DefaultPolicy] || !names["pro"] || !names["new"] {
			t.Errorf("Policies() names %v, want default, pro and new", names)
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10)}}))
}

// ErrInvalidKey: "The in-process stores accept every string, the empty
// string included"; WithPolicyFunc: "the empty name is the default policy".
func TestClaimEveryKeyAccepted(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		for _, key := range []string{"", huge, "\x00", "\xff\xfe", strings.Repeat("é", 1000)} {
			d, err := s.AllowN(key, 1)
			if err != nil || !d.Allowed || d.Policy != keyrate.DefaultPolicy {
				t.Errorf("AllowN(%.8q) = %+v, %v; want allowed under the default policy", key, d, err)
			}
			if s.Allow(key) {
				t.Errorf("second request of %.8q allowed at 1/s", key)
			}
		}
		if s.Len() != 5 {
			t.Errorf("Len() = %d, want 5", s.Len())
		}
	}, keyrate.WithPolicyFunc(func(string) string { return "" }))
}

// Decision.Window: "the one with the fewest tokens left (the first of
// those), which, when the request was denied, is one that denied it";
// Remaining "the least over the policy's windows"; RetryAfter "the time
// until every window will hold the requested cost".
func TestClaimDecisionWindow(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		// Two windows of 4: equal after each spend, so the first is reported.
		d, err := s.AllowN("k", 2)
		if err != nil || !d.Allowed || d.Window != 0 || d.Remaining != 2 || d.Limit != keyrate.PerSecond(4) {
			t.Fatalf("AllowN(k, 2) = %+v, %v; want window 0 (a tie), 2 left", d, err)
		}
		clk.Advance(time.Second)  // the per-second window refills; the per-minute one does not
		d, err = s.AllowN("k", 3) // the second window holds 2 and 1/15
		if err != nil || d.Allowed || d.Window != 1 || d.Remaining != 2 || d.RetryAfter != 14*time.Second {
			t.Fatalf("AllowN(k, 3) a second later = %+v, %v; want denied by window 1, 2 left, RetryAfter 14s", d, err)
		}
		d, err = s.AllowN("k", 2)
		if err != nil || !d.Allowed || d.Window != 1 || d.Remaining != 0 {
			t.Fatalf("AllowN(k, 2) = %+v, %v; want allowed, window 1 with 0 left", d, err)
		}
		d, _ = s.AllowN("k", 1)
		if d.Allowed || d.Window != 1 || d.RetryAfter != 14*time.Second {
			t.Errorf("AllowN(k, 1) with the minute window empty = %+v; want denied by window 1, RetryAfter 14s", d)
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(4), keyrate.PerMinute(4)}}))
}

// A key whose policy, by WithPolicyFunc, the store lacks: AllowN and
// Reserve "return an error wrapping ErrUnknownPolicy (and Allow false)";
// Refund likewise; Peek reports the zero Decision (Allowed false), as
// redisbucket documents; and nothing is stored.
func TestClaimUnknownPolicyFromFunc(t *testing.T) {
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		if s.Allow("k") {
			t.Error("Allow under an unknown policy = true")
		}
		if _, err := s.AllowN("k", 1); !errors.Is(err, keyrate.ErrUnknownPolicy) || !strings.Contains(err.Error(), "gone") {
			t.Errorf("AllowN = %v, want ErrUnknownPolicy naming it", err)
		}
		if _, err := s.Reserve("k", 1, time.Second); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Errorf("Reserve = %v, want ErrUnknownPolicy", err)
		}
		if err := s.Wait(context.Background(), "k", 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Errorf("Wait = %v, want ErrUnknownPolicy", err)
		}
		if err := s.Refund("k", 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Errorf("Refund = %v, want ErrUnknownPolicy", err)
		}
		if d := s.Peek("k"); d != (keyrate.Decision{}) {
			t.Errorf("Peek = %+v, want the zero Decision", d)
		}
		if s.Len() != 0 {
			t.Errorf("Len() = %d, want 0", s.Len())
		}
	}, keyrate.WithPolicyFunc(func(string) string { return "gone" }))
}

// Option: "A store's New applies its options in order. Of an option given
// twice the later wins, except WithPolicies, whose policies add to an
// earlier one's (a name given twice is then an error); a nil Option, and
// WithClock(nil) or WithObserver(nil), change nothing. New returns the
// error of the first invalid option."
func TestClaimOptionsInOrder(t *testing.T) {
	a, b := clock.NewManual(0), clock.NewManual(time.Hour)
	var seen []string
	obs := keyrate.ObserverFunc(func(e keyrate.Event) { seen = append(seen, e.Key) })
	for _, c := range claimStores {
		s, err := c.new(keyrate.PerSecond(1),
			keyrate.WithMaxKeys(1), keyrate.WithMaxKeys(2),
			keyrate.WithClock(a), keyrate.WithClock(b), keyrate.WithClock(nil), nil,
			keyrate.WithObserver(obs), keyrate.WithObserver(nil),
			keyrate.WithPolicies(keyrate.Unlimited("x")), keyrate.WithPolicies(keyrate.Unlimited("y")),
			keyrate.WithPolicyFunc(func(string) string { return "x" }), keyrate.WithPolicyFunc(func(string) string { return "" }))
		if err != nil {
			t.Fatalf("%s: New = %v", c.name, err)
		}
		seen = seen[:0]
		s.Allow("k1")
		s.Allow("k2")
		if _, err := s.AllowN("k3", 1); !errors.Is(err, keyrate.ErrStoreFull) {
			t.Errorf("%s: a third key with WithMaxKeys(1) then (2) = %v, want ErrStoreFull", c.name, err)
		}
		if len(seen) != 3 {
			t.Errorf("%s: the observer saw %v, want 3 events: WithObserver(nil) dropped it", c.name, seen)
		}
		for _, name := range []string{"x", "y"} {
			if _, err := s.Tier(name); err != nil {
				t.Errorf("%s: Tier(%s) = %v: WithPolicies given twice lost one", c.name, name, err)
			}
		}
		b.Advance(time.Second)
		if !s.Allow("k1") {
			t.Errorf("%s: k1 denied a second after, on the later clock: the store reads another", c.name)
		}
		s.Close()
		_, err = c.new(keyrate.PerSecond(1), keyrate.WithMaxKeys(0), keyrate.WithSweepInterval(-1))
		if err == nil || !strings.Contains(err.Error(), "WithMaxKeys") || strings.Contains(err.Error(), "WithSweepInterval") {
			t.Errorf("%s: two invalid options: %v, want the first's error only", c.name, err)
		}
		if _, err := c.new(keyrate.PerSecond(1), keyrate.WithPolicies(keyrate.Unlimited("x")), keyrate.WithPolicies(keyrate.Unlimited("x"))); !errors.Is(err, keyrate.ErrInvalidPolicy) {
			t.Errorf("%s: one name in two WithPolicies = %v, want ErrInvalidPolicy", c.name, err)
		}
	}
}

// BoundedLimiter.Close stops "every ... goroutine the store started ... and
// waits for them to return. It is safe to call more than once": here from
// several goroutines at once, while others call the store and sweep it (a
// race the race detector would see), and the store keeps answering after.
// The package's TestMain fails the binary if a sweeper outlives it.
func TestClaimCloseConcurrentWithUse(t *testing.T) {
	for _, c := range claimStores {
		s, err := c.new(keyrate.PerSecond(1000), keyrate.WithSweepInterval(time.Millisecond), keyrate.WithEvictionGrace(0), keyrate.WithMaxKeys(64))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := range 200 {
					s.Allow(fmt.Sprint(g, "-", i%100))
					if i%50 == 0 {
						s.Sweep()
					}
				}
			}()
			go func() {
				defer wg.Done()
				if err := s.Close(); err != nil {
					t.Errorf("%s: Close() = %v", c.name, err)
				}
			}()
		}
		wg.Wait()
		if st := s.Stats(); st.Keys > 64 || s.Len() > 64 {
			t.Errorf("%s: %+v, Len %d: above WithMaxKeys(64)", c.name, st, s.Len())
		}
		if _, err := s.AllowN("after", 1); err != nil && !errors.Is(err, keyrate.ErrStoreFull) {
			t.Errorf("%s: AllowN after Close = %v", c.name, err)
		}
	}
}

// WaitLimiter.Wait and Reservation.Wait: "A nil ctx is
// context.Background()": they sleep on the store's clock until the slot.
func TestClaimWaitNilContext(t *testing.T) {
	var nilCtx context.Context
	eachClaimStore(t, keyrate.PerMinute(1), func(t *testing.T, s claimStore, clk *clock.Manual) {
		if err := s.Wait(nilCtx, "k", 1); err != nil {
			t.Fatalf("Wait(nil ctx) on a full bucket = %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Wait(nilCtx, "k", 1) }()
		if err := clk.AwaitSleepers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		clk.Step()
		if err := <-done; err != nil || clk.Now() != time.Minute {
			t.Errorf("Wait(nil ctx) = %v at %v, want nil at 1m", err, clk.Now())
		}
		r, err := s.Reserve("k", 1, time.Hour)
		if err != nil || !r.OK() {
			t.Fatal(r, err)
		}
		go func() { done <- r.Wait(nilCtx) }()
		if err := clk.AwaitSleepers(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		clk.Step()
		if err := <-done; err != nil || clk.Now() != 2*time.Minute {
			t.Errorf("Reservation.Wait(nil ctx) = %v at %v, want nil at 2m", err, clk.Now())
		}
	})
}

// DefaultEvictionGrace: "A client that calls at least once a minute,
// however far under its limit, keeps its bucket": routine maintenance (the
// sampling on insertion, mutexbucket's paced sweep) evicts no bucket that
// has been full for less than a minute, while an explicit Sweep "removes
// every full bucket now".
func TestClaimDefaultEvictionGrace(t *testing.T) {
	if keyrate.DefaultEvictionGrace != time.Minute {
		t.Fatalf("DefaultEvictionGrace = %v, want a minute", keyrate.DefaultEvictionGrace)
	}
	eachClaimStore(t, keyrate.PerSecond(1000), func(t *testing.T, s claimStore, clk *clock.Manual) {
		for i := range 5000 {
			s.Allow(fmt.Sprint("early-", i)) // full again 1ms later
		}
		clk.Advance(time.Minute) // full for 59.999s
		for i := range 5000 {
			s.Allow(fmt.Sprint("late-", i))
		}
		s.Close() // waits for mutexbucket's paced sweep in flight
		if st := s.Stats(); st.Evictions != 0 || st.Keys != 10000 {
			t.Errorf("Stats() = %+v: routine maintenance evicted buckets full for under a minute", st)
		}
		clk.Advance(time.Millisecond) // the late keys are full again too
		if n := s.Sweep(); n != 10000 {
			t.Errorf("Sweep() removed %d, want every full bucket (10000)", n)
		}
	})
}

// MaxLimits: "the most limits (windows) one Policy can hold": a policy of
// exactly MaxLimits windows works in every store, each window keeping its
// own bound. Refund: "A key the store does not track is full and gains
// nothing", also in a full store, where it is no error and stores nothing.
func TestClaimMaxLimitsAndRefundUntracked(t *testing.T) {
	limits := make([]keyrate.Limit, keyrate.MaxLimits)
	for i := range limits {
		limits[i] = keyrate.Limit{Rate: 10 + i, Per: time.Duration(i+1) * time.Second, Burst: 10 + i}
	}
	limits[keyrate.MaxLimits-1] = keyrate.PerHour(5) // the tightest, last
	eachClaimStore(t, keyrate.PerSecond(1), func(t *testing.T, s claimStore, _ *clock.Manual) {
		for i := range 5 {
			if d, err := s.AllowN("k", 1); err != nil || !d.Allowed || d.Remaining != 4-i || d.Window != keyrate.MaxLimits-1 {
				t.Fatalf("request %d under %d windows = %+v, %v", i, keyrate.MaxLimits, d, err)
			}
		}
		if d, _ := s.AllowN("k", 1); d.Allowed || d.Window != keyrate.MaxLimits-1 {
			t.Errorf("sixth request = %+v, want denied by the last window", d)
		}
		if err := s.Refund("untracked", 1); err != nil {
			t.Errorf("Refund of an untracked key in a full store = %v, want nil", err)
		}
		if s.Len() != 1 {
			t.Errorf("Len() = %d, want 1: the refund stored a key", s.Len())
		}
	}, keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: limits}), keyrate.WithMaxKeys(1))
}

// Decision: "Its durations are never negative: a debt longer than a
// time.Duration can hold ... saturates at the longest duration"; a clock
// past the state's range stops time ("which can only deny"). Driven with
// the extreme readings a Manual clock can give, before and after the
// store's epoch.
func TestClaimExtremeClockReadings(t *testing.T) {
	readings := []time.Duration{math.MaxInt64, math.MinInt64, 0, math.MaxInt64 / 2, -1, math.MinInt64 / 2, math.MaxInt64}
	for _, l := range []keyrate.Limit{keyrate.PerSecond(1), keyrate.Every(24 * time.Hour).WithBurst(3), {Rate: 3, Per: 10 * time.Second, Burst: 3}, keyrate.PerMinute(5).Using(keyrate.SlidingWindow)} {
		eachClaimStore(t, l, func(t *testing.T, s claimStore, clk *clock.Manual) {
			allowed := 0
			for i, at := range readings {
				clk.Set(at)
				d, err := s.AllowN("k", 1)
				if err != nil {
					t.Fatalf("%v: AllowN at %v = %v", l, at, err)
				}
				if d.Allowed {
					allowed++
				}
				for _, p := range []keyrate.Decision{d, s.Peek("k")} {
					if p.RetryAfter < 0 || p.ResetAfter < 0 || p.WindowResetAfter < 0 || p.Remaining < 0 {
						t.Errorf("%v: step %d at %v: %+v has a negative field", l, i, at, p)
					}
				}
				if r, err := s.Reserve("r", 1, math.MaxInt64); err != nil || r.Delay() < 0 {
					t.Errorf("%v: step %d at %v: Reserve = %+v, %v", l, i, at, r, err)
				}
			}
			// Time past the range stops: the readings above span at most the
			// range once (from the epoch at 0 to its end), so at most a full
			// bucket and what one pass of the range refills.
			if allowed > l.Burst+1 {
				t.Errorf("%v: %d of %d allowed across extreme readings", l, allowed, len(readings))
			}
		})
	}
}

// Reservation.Cancel: "A second Cancel, or one after the slot ... gives
// back nothing"; "they are lost to the key ... never minted". A second
// Cancel of a reservation whose tokens a later reservation has taken again
// (the same slot, since the first Cancel gave them back) must not give
// that later reservation's tokens away: its holder still proceeds at its
// slot, so a third reservation sharing that slot would exceed the limit.
// This is the common `defer r.Cancel()` after a Wait that its context
// ended (and which cancelled already), with other traffic in between.
func TestClaimSecondCancelAfterAnotherReservation(t *testing.T) {
	for _, l := range []keyrate.Limit{keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1}, keyrate.PerMinute(3)} {
		eachClaimStore(t, l, func(t *testing.T, s claimStore, clk *clock.Manual) {
			if _, err := s.AllowN("k", l.Burst); err != nil {
				t.Fatal(err)
			}
			r1, err := s.Reserve("k", 1, 10*time.Hour)
			if err != nil || !r1.OK() {
				t.Fatal(r1, err)
			}
			if !r1.Cancel() {
				t.Fatal("Cancel of the latest reservation gave nothing back")
			}
			r2, err := s.Reserve("k", 1, 10*time.Hour) // the same slot as r1
			if err != nil || !r2.OK() || r2.At() != r1.At() {
				t.Fatalf("Reserve after the cancel = %+v, %v; want r1's slot %v", r2, err, r1.At())
			}
			if r1.Cancel() {
				t.Errorf("%v: a second Cancel of r1 gave back r2's tokens", l)
			}
			r3, err := s.Reserve("k", 1, 10*time.Hour)
			if err != nil || !r3.OK() {
				t.Fatal(r3, err)
			}
			if r3.At() == r2.At() {
				t.Errorf("%v: r3 shares r2's slot %v: two tokens promised for one", l, r2.At())
			}
		})
	}
}
