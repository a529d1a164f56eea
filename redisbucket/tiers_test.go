package redisbucket_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/redisbucket"
)

// refStore is the reference: rules.Rules applied to a plain map, with a
// key's states carried over (rules.Rules.Carry) when its policy changes,
// as the in-process stores do. Its policies are compiled by a
// rules.Policies on the test's clock, so that they share one epoch.
type refStore struct {
	pols *rules.Policies
	keys map[string]refBucket
}

type refBucket struct {
	rs *rules.Rules
	s  []rules.State
}

func newRefStore(t *testing.T, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) *refStore {
	t.Helper()
	set, err := config.Configure(nil, append(opts, keyrate.WithClock(clk))...)
	if err != nil {
		t.Fatal(err)
	}
	pols, err := rules.NewPolicies(limit, set)
	if err != nil {
		t.Fatal(err)
	}
	return &refStore{pols: pols, keys: map[string]refBucket{}}
}

// rules returns the current version of the policy named name.
func (r *refStore) rules(t *testing.T, name string) *rules.Rules {
	t.Helper()
	tier, err := r.pols.Tier(name)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := r.pols.Rules(tier)
	return rs
}

// bucket returns key's states under rs at reading now, carried over if
// the key was under another policy (or another version of it).
func (r *refStore) bucket(key string, rs *rules.Rules, now time.Duration) []rules.State {
	b, ok := r.keys[key]
	s := make([]rules.State, rs.Len())
	switch {
	case !ok:
		for i := range s {
			s[i] = rs.Rule(i).FullState(rs.Rule(i).Ticks(now))
		}
	case b.rs == rs:
		copy(s, b.s)
	default:
		rs.Carry(b.rs, b.s, now, s)
	}
	return s
}

func (r *refStore) allow(rs *rules.Rules, key string, cost int) (keyrate.Decision, error) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	if rs.Unlimited() {
		return rs.UnlimitedDecision(), nil
	}
	now := r.pols.Now()
	s := r.bucket(key, rs, now)
	denied := rs.Take(s, now, cost)
	r.keys[key] = refBucket{rs, s}
	return rs.Decide(s, now, cost, denied), nil
}

func (r *refStore) refund(rs *rules.Rules, key string, cost int) error {
	if err := rs.CheckCost(cost); err != nil || rs.Unlimited() {
		return err
	}
	if _, ok := r.keys[key]; !ok {
		return nil
	}
	now := r.pols.Now()
	s := r.bucket(key, rs, now)
	rs.Refund(s, now, cost)
	r.keys[key] = refBucket{rs, s}
	return nil
}

func (r *refStore) peek(rs *rules.Rules, key string) keyrate.Decision {
	if rs.Unlimited() {
		return rs.UnlimitedDecision()
	}
	now := r.pols.Now()
	return rs.Peek(r.bucket(key, rs, now), now)
}

// minBurst returns the smallest Burst of p's windows (2^30 if it has none).
func minBurst(p keyrate.Policy) int {
	b := 1 << 30
	for _, l := range p.Limits {
		b = min(b, l.Burst)
	}
	return b
}

// randomPolicy returns a policy named name of 1 to 3 windows (one in
// twenty of 8), or one in ten unlimited, each window of 1 to 20 tokens of
// 1µs to 2s, to the ns (so that keyrate counts in ticks of 1/2 to 1/14 ns,
// or rounds the interval up, and the script in ticks of 1/k µs for any k),
// and a burst of 1 to 12.
func randomPolicy(rng *rand.Rand, name string) keyrate.Policy {
	if rng.IntN(10) == 0 {
		return keyrate.Unlimited(name)
	}
	n := 1 + rng.IntN(3)
	if rng.IntN(20) == 0 {
		n = keyrate.MaxLimits
	}
	p := keyrate.Policy{Name: name}
	for range n {
		rate := 1 + rng.IntN(20)
		scale := []int64{10_000, 1_000_000, 100_000_000, 2_000_000_000}[rng.IntN(4)]
		interval := time.Microsecond + time.Duration(rng.Int64N(scale))
		per := time.Duration(rate)*interval + time.Duration(rng.IntN(rate))
		p.Limits = append(p.Limits, keyrate.Limit{Rate: rate, Per: per, Burst: 1 + rng.IntN(12)})
	}
	return p
}

// TestPolicyDifferential drives a redisbucket.Store (with WithDenyCache
// for even seeds; on one server and on a Redis Cluster) and the reference
// (rules.Rules on a map) with the same random operations, at the same
// times in whole µs: requests under each key's policy (WithPolicyFunc)
// and under tiers, with random costs, peeks, refunds, runtime changes of
// every policy (the default included) to random limits, keys moving
// between policies, and time steps from 1µs to a minute, one in ten
// backwards. Every Decision must be equal, field for field, and every
// error too.
//
// The limits are drawn at random, so that no two policies have the same:
// keyrate carries a key over to a new version of its policy even when the
// limits are the same, moving its full windows' states to now, which
// differs from keeping them only once the clock has gone back; the script
// sees only the limits.
func TestPolicyDifferential(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) { policyDifferential(t, b.client(t), randomPolicy, true) })
	}
}

// TestWindowDifferential is TestPolicyDifferential with policies that mix
// token buckets, fixed windows and sliding windows (randomWindowPolicy),
// and time moving forward only: decisions, refunds and carrying a key
// over between algorithms equal keyrate's, with the reference's windows
// aligned to reading 0, as the script aligns them to the time source's 0
// (the Unix epoch of the server's TIME).
func TestWindowDifferential(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) { policyDifferential(t, b.client(t), randomWindowPolicy, false) })
	}
}

// windowLengths are randomWindowPolicy's window lengths: whole µs, as
// redisbucket requires, with small common multiples, ending on and off
// the tests' start.
var windowLengths = []time.Duration{40 * time.Microsecond, 250 * time.Microsecond, time.Millisecond, 3 * time.Millisecond,
	7 * time.Millisecond, 100 * time.Millisecond, time.Second, 2 * time.Second, time.Minute}

// randomWindowPolicy returns a policy named name of 1 to 3 windows (one in
// twenty unlimited), each a fixed window, a sliding window (of 1 to 20 per
// one of windowLengths) or a token bucket as randomPolicy draws one.
func randomWindowPolicy(rng *rand.Rand, name string) keyrate.Policy {
	if rng.IntN(20) == 0 {
		return keyrate.Unlimited(name)
	}
	p := keyrate.Policy{Name: name}
	for range 1 + rng.IntN(3) {
		switch rng.IntN(3) {
		case 0:
			b := randomPolicy(rng, name)
			for b.Unlimited {
				b = randomPolicy(rng, name)
			}
			p.Limits = append(p.Limits, b.Limits[0])
		default:
			alg := []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow}[rng.IntN(2)]
			l := keyrate.Limit{Rate: 1 + rng.IntN(20), Per: windowLengths[rng.IntN(len(windowLengths))]}
			p.Limits = append(p.Limits, l.Using(alg))
		}
	}
	return p
}

// far reports whether d holds a duration beyond 30 days.
func far(d keyrate.Decision) bool {
	const days = 30 * 24 * time.Hour
	return d.RetryAfter > days || d.ResetAfter > days || d.WindowResetAfter > days
}

// policyDifferential is TestPolicyDifferential on client's Redis, with
// policies drawn by random, and one time step in ten backwards if back.
func policyDifferential(t *testing.T, client redis.UniversalClient, random func(*rand.Rand, string) keyrate.Policy, back bool) {
	names := []string{keyrate.DefaultPolicy, "free", "pro"}
	keys := []string{"a", "b", "c"}
	for seed := uint64(1); seed <= 8; seed++ {
		cache := seed%2 == 0 // half the seeds with the deny cache
		t.Run(fmt.Sprintf("seed=%d/deny-cache=%v", seed, cache), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			pick := func(name string) keyrate.Policy { return random(rng, name) }
			var ps []keyrate.Policy
			for _, n := range names {
				ps = append(ps, pick(n))
			}
			var mu sync.Mutex
			tierOf := map[string]string{}
			policyFunc := func(key string) string {
				mu.Lock()
				defer mu.Unlock()
				return tierOf[key]
			}
			opts := []keyrate.Option{keyrate.WithPolicies(ps...), keyrate.WithPolicyFunc(policyFunc)}
			clk := clock.NewManual(0) // the reference's epoch: where the script's windows start
			ref := newRefStore(t, keyrate.PerSecond(1), clk, opts...)
			clk.Set(start)
			prefix := uniquePrefix(t)
			gotOpts := append(slices.Clone(opts), redisbucket.WithTimeSource(clk),
				redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
			if cache {
				gotOpts = append(gotOpts, redisbucket.WithDenyCache(16))
			}
			got := mustNew(t, client, keyrate.PerSecond(1), gotOpts...)
			at := time.Duration(0)
			var trace []string
			for i := 0; i < 1500; i++ {
				key, name := keys[rng.IntN(len(keys))], names[rng.IntN(len(names))]
				tier, err := got.Tier(name)
				if err != nil {
					t.Fatal(err)
				}
				rs := ref.rules(t, name)
				keyRS, err := ref.pols.ForKey(key)
				if err != nil {
					t.Fatal(err)
				}
				where := fmt.Sprintf("op %d at +%v", i, at)
				fatalf := func(format string, args ...any) {
					t.Helper()
					v, err := client.Get(t.Context(), prefix+key).Result()
					t.Fatalf("%s\n%s: %s\n(Redis now holds %q, %v, at %s)", strings.Join(trace, "\n"), where, fmt.Sprintf(format, args...), v, err, prefix+key)
				}
				note := func(format string, args ...any) {
					trace = append(trace, where+": "+fmt.Sprintf(format, args...))
					if len(trace) > 40 {
						trace = trace[1:]
					}
				}
				// Under windows, a debt carried over far ahead saturates
				// where each store's range ends: years ahead of the clock
				// in keyrate, centuries in Redis (see redisbucket's doc).
				// A key that gets that far is compared but for those
				// durations, and forgotten by both.
				eq := func(g, w keyrate.Decision) bool {
					if back || (!far(g) && !far(w)) {
						return g == w
					}
					note("%q is forgotten: %+v, %+v", key, g, w)
					if err := client.Del(t.Context(), prefix+key).Err(); err != nil {
						t.Fatal(err)
					}
					delete(ref.keys, key)
					g.RetryAfter, g.ResetAfter, g.WindowResetAfter = w.RetryAfter, w.ResetAfter, w.WindowResetAfter
					return g == w
				}
				switch op := rng.IntN(24); {
				case op < 7:
					cost := 1 + rng.IntN(minBurst(rs.Policy()))
					g, gerr := got.AllowTier(key, tier, cost)
					w, werr := ref.allow(rs, key, cost)
					note("AllowTier(%q, %s, %d) = %+v", key, name, cost, g)
					if !eq(g, w) || gerr != nil || werr != nil {
						fatalf("AllowTier(%q, %s, %d) = %+v, %v; want %+v, %v", key, name, cost, g, gerr, w, werr)
					}
				case op < 11:
					cost := 1 + rng.IntN(minBurst(keyRS.Policy()))
					g, gerr := got.AllowN(key, cost)
					w, werr := ref.allow(keyRS, key, cost)
					note("AllowN(%q, %d) under %s = %+v", key, cost, keyRS.Name(), g)
					if !eq(g, w) || gerr != nil || werr != nil {
						fatalf("AllowN(%q, %d) under %s = %+v, %v; want %+v, %v", key, cost, keyRS.Name(), g, gerr, w, werr)
					}
				case op < 13:
					cost := 1 + rng.IntN(minBurst(rs.Policy()))
					gerr, werr := got.RefundTier(key, tier, cost), ref.refund(rs, key, cost)
					note("RefundTier(%q, %s, %d)", key, name, cost)
					if gerr != nil || werr != nil {
						fatalf("RefundTier(%q, %s, %d) = %v; want %v", key, name, cost, gerr, werr)
					}
				case op < 14:
					cost := 1 + rng.IntN(minBurst(keyRS.Policy()))
					gerr, werr := got.Refund(key, cost), ref.refund(keyRS, key, cost)
					note("Refund(%q, %d) under %s", key, cost, keyRS.Name())
					if gerr != nil || werr != nil {
						fatalf("Refund(%q, %d) under %s = %v; want %v", key, cost, keyRS.Name(), gerr, werr)
					}
				case op < 16:
					if g, w := got.Peek(key), ref.peek(keyRS, key); !eq(g, w) {
						fatalf("Peek(%q) under %s = %+v; want %+v", key, keyRS.Name(), g, w)
					}
				case op < 17:
					p := pick(name)
					note("SetPolicy(%v)", p)
					if err := got.SetPolicy(p); err != nil {
						fatalf("SetPolicy(%v): %v", p, err)
					}
					if err := ref.pols.Set(p); err != nil {
						t.Fatal(err)
					}
				case op < 18:
					mu.Lock()
					tierOf[key] = names[rng.IntN(len(names))]
					note("%q moves to %s", key, tierOf[key])
					mu.Unlock()
				default:
					// Steps of up to 10µs, 1ms, 100ms, 2s or a minute, in
					// whole µs; one in ten goes back (never before the
					// stores' creation).
					scale := []int64{10, 1000, 100_000, 2_000_000, 60_000_000}[rng.IntN(5)]
					step := time.Duration(rng.Int64N(scale)+1) * time.Microsecond
					if rng.IntN(10) == 0 && back {
						step = -step
					}
					at = max(at+step, 0)
					clk.Set(start + at)
				}
			}
		})
	}
}

// TestConcurrentWindows releases, at once, goroutines of two stores (two
// processes, each with its own client) on one key under a policy of two
// windows, on a frozen clock, three times: all or nothing, each wave
// admits exactly what the tighter window holds. First the first window's
// burst of 7 (leaving the second 5 of 12); 7s later, with the first full
// again, the 5 the second holds (it refilled 7s·12/h of a token); 7s later
// none, as the second holds less than one.
func TestConcurrentWindows(t *testing.T) {
	srv := server(t)
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{
		{Rate: 1, Per: time.Second, Burst: 7},
		{Rate: 12, Per: time.Hour, Burst: 12},
	}}
	clk := clock.NewManual(start)
	prefix := uniquePrefix(t)
	var stores []*redisbucket.Store
	for range 2 {
		stores = append(stores, mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(1),
			keyrate.WithPolicies(pro), redisbucket.WithTimeSource(clk),
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout)))
	}
	ref := newRefStore(t, keyrate.PerSecond(1), clk, keyrate.WithPolicies(pro))
	const perStore, calls = 8, 3
	for wave, want := range []int64{7, 5, 0} {
		var admitted atomic.Int64
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		errs := make(chan error, len(stores)*perStore*calls)
		for _, s := range stores {
			tier, err := s.Tier("pro")
			if err != nil {
				t.Fatal(err)
			}
			for range perStore {
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					ready.Done()
					<-release
					for range calls {
						d, err := s.AllowTier("k", tier, 1)
						if err != nil {
							errs <- err
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
		}
		ready.Wait()
		close(release)
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", wave, err)
		}
		// The reference, called one at a time, admits as many.
		var serial int64
		for range len(stores) * perStore * calls {
			if d, _ := ref.allow(ref.rules(t, "pro"), "k", 1); d.Allowed {
				serial++
			}
		}
		if got := admitted.Load(); got != want || serial != want {
			t.Fatalf("wave %d admitted %d of %d calls (the reference %d), want exactly %d", wave, got, len(stores)*perStore*calls, serial, want)
		}
		clk.Advance(7 * time.Second)
	}
}

// TestPolicyErrors: an invalid policy, an unknown tier or a bad cost is an
// error that wraps the documented sentinel and names the value, from New,
// SetPolicy (which then changes nothing), Tier, AllowTier, Refund and
// RefundTier; none sends anything to Redis, and an unlimited policy sends
// nothing either.
func TestPolicyErrors(t *testing.T) {
	client := newClient(t, unreachable)
	ok := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10).WithBurst(8), keyrate.PerHour(100)}}
	bad := []struct {
		name string
		p    keyrate.Policy
		want []error
		msg  string
	}{
		{"no name", keyrate.Policy{Limits: []keyrate.Limit{keyrate.PerSecond(1)}}, []error{keyrate.ErrInvalidPolicy}, "the name is empty"},
		{"no limits", keyrate.Policy{Name: "x"}, []error{keyrate.ErrInvalidPolicy}, `"x" has no limits`},
		{"too many", keyrate.Policy{Name: "x", Limits: slices.Repeat([]keyrate.Limit{keyrate.PerSecond(1)}, keyrate.MaxLimits+1)},
			[]error{keyrate.ErrInvalidPolicy}, `"x" has 9 limits, above the most of 8`},
		{"invalid window", keyrate.Policy{Name: "x", Limits: []keyrate.Limit{keyrate.PerSecond(1), {Rate: 1, Per: time.Second}}},
			[]error{keyrate.ErrInvalidPolicy, keyrate.ErrInvalidLimit}, `"x" window 1 (1 per 1s, burst 0): invalid limit: Burst 0 is below 1`},
		{"window too fast for the script", keyrate.Policy{Name: "x", Limits: []keyrate.Limit{keyrate.PerSecond(2_000_000), keyrate.PerSecond(1)}},
			[]error{keyrate.ErrInvalidPolicy, keyrate.ErrInvalidLimit}, `"x" window 0 (2000000 per 1s, burst 2000000)`},
		{"window too long for the script", keyrate.Policy{Name: "x", Limits: []keyrate.Limit{keyrate.PerSecond(1), keyrate.Every(24 * time.Hour).WithBurst(53_000)}},
			[]error{keyrate.ErrInvalidPolicy, keyrate.ErrInvalidLimit}, "window 1 (1 per 24h0m0s, burst 53000): invalid limit: Burst 53000 takes too long to fill"},
		{"unlimited with limits", keyrate.Policy{Name: "x", Unlimited: true, Limits: []keyrate.Limit{keyrate.PerSecond(1)}},
			[]error{keyrate.ErrInvalidPolicy}, `"x" is unlimited but has 1 limits`},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				for _, w := range c.want {
					if !errors.Is(err, w) {
						t.Errorf("%s: %v, want an error wrapping %v", what, err, w)
					}
				}
				if err != nil && !strings.Contains(err.Error(), c.msg) {
					t.Errorf("%s: %q, want it to say %q", what, err, c.msg)
				}
			}
			s, err := redisbucket.New(client, keyrate.PerSecond(1), keyrate.WithPolicies(c.p))
			if s != nil {
				t.Errorf("New with policy %v returned a store", c.p)
			}
			check("New", err)
			s = mustNew(t, client, keyrate.PerSecond(1), keyrate.WithPolicies(ok))
			before := s.Policies()
			check("SetPolicy", s.SetPolicy(c.p))
			if after := s.Policies(); len(after) != len(before) {
				t.Errorf("after a failed SetPolicy, Policies = %v, want %v", after, before)
			}
		})
	}
	if _, err := redisbucket.New(client, keyrate.PerSecond(1), keyrate.WithPolicies(ok, ok)); !errors.Is(err, keyrate.ErrInvalidPolicy) || !strings.Contains(err.Error(), `two policies are named "pro"`) {
		t.Errorf("New with two policies named pro: %v, want ErrInvalidPolicy naming it", err)
	}

	s := mustNew(t, client, keyrate.PerSecond(5), keyrate.WithPolicies(ok, keyrate.Unlimited("internal")),
		keyrate.WithPolicyFunc(func(key string) string {
			if key == "gold-user" {
				return "gold"
			}
			return ""
		}))
	other := mustNew(t, client, keyrate.PerSecond(5), keyrate.WithPolicies(ok))
	if _, err := s.Tier("gold"); !errors.Is(err, keyrate.ErrUnknownPolicy) || !strings.Contains(err.Error(), `"gold"`) {
		t.Errorf(`Tier("gold") = %v, want ErrUnknownPolicy naming it`, err)
	}
	pro, _ := s.Tier("pro")
	otherPro, _ := other.Tier("pro")
	for _, c := range []struct {
		what string
		err  error
		want error
		msg  string
	}{
		{"AllowTier with another store's Tier", second(s.AllowTier("k", otherPro, 1)), keyrate.ErrUnknownPolicy, `"pro" is a Tier of another store`},
		{"RefundTier with another store's Tier", s.RefundTier("k", otherPro, 1), keyrate.ErrUnknownPolicy, `"pro" is a Tier of another store`},
		{"AllowN for a key WithPolicyFunc puts under gold", second(s.AllowN("gold-user", 1)), keyrate.ErrUnknownPolicy, `"gold", named by WithPolicyFunc for key "gold-user"`},
		{"Refund for a key WithPolicyFunc puts under gold", s.Refund("gold-user", 1), keyrate.ErrUnknownPolicy, `"gold"`},
		{"PeekContext for a key WithPolicyFunc puts under gold", second(s.PeekContext(t.Context(), "gold-user")), keyrate.ErrUnknownPolicy, `"gold"`},
		{"Refund(0)", s.Refund("k", 0), keyrate.ErrInvalidCost, "cost 0 is below 1"},
		{"Refund(-2)", s.Refund("k", -2), keyrate.ErrInvalidCost, "cost -2 is below 1"},
		{"Refund above the burst", s.Refund("k", 6), keyrate.ErrCostExceedsBurst, "cost 6 is above the burst of 5"},
		{"RefundTier above the smallest burst", s.RefundTier("k", pro, 9), keyrate.ErrCostExceedsBurst, `cost 9 is above the burst of 8 of policy "pro"'s smallest window`},
		{"AllowTier above the smallest burst", second(s.AllowTier("k", pro, 9)), keyrate.ErrCostExceedsBurst, `cost 9 is above the burst of 8 of policy "pro"'s smallest window`},
		{"RefundTier(0)", s.RefundTier("k", pro, 0), keyrate.ErrInvalidCost, "cost 0 is below 1"},
		{"Refund of the empty key", s.Refund("", 1), keyrate.ErrInvalidKey, "the empty key"},
		{"AllowTier of the empty key", second(s.AllowTier("", pro, 1)), keyrate.ErrInvalidKey, "the empty key"},
	} {
		if !errors.Is(c.err, c.want) || !strings.Contains(c.err.Error(), c.msg) {
			t.Errorf("%s: %v, want an error wrapping %v that says %q", c.what, c.err, c.want, c.msg)
		}
	}
	if s.Allow("gold-user") {
		t.Error(`Allow("gold-user") = true under an unknown policy`)
	}
	if d := s.Peek("gold-user"); d != (keyrate.Decision{}) {
		t.Errorf(`Peek("gold-user") = %+v, want a zero Decision`, d)
	}
	// An unlimited tier answers without Redis, which is down.
	internal, _ := s.Tier("internal")
	want := keyrate.Decision{Allowed: true, Policy: "internal", Remaining: math.MaxInt}
	if d, err := s.AllowTier("k", internal, 1_000_000); d != want || err != nil {
		t.Errorf("AllowTier under an unlimited policy = %+v, %v; want %+v", d, err, want)
	}
	if err := s.RefundTier("k", internal, 1_000_000); err != nil {
		t.Errorf("RefundTier under an unlimited policy = %v", err)
	}
	if st := s.Stats(); st != (redisbucket.Stats{}) {
		t.Errorf("Stats = %+v, want zero: no call may reach Redis", st)
	}
}

// second returns its second argument: the error of a call that returns
// two values.
func second[T any](_ T, err error) error { return err }

// TestRefundMissingKey: a refund for a key Redis does not hold writes
// nothing (the key is full), and a refund of what a request spent, before
// anything refilled, leaves the key as if the request had not been made.
func TestRefundMissingKey(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	prefix := uniquePrefix(t)
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(100)}}
	s := mustNew(t, client, keyrate.PerMinute(3), keyrate.WithPolicies(pro),
		redisbucket.WithTimeSource(clock.NewManual(start)), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	tier, _ := s.Tier("pro")
	if err := s.RefundTier("k", tier, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(t.Context(), prefix+"k").Result(); err != nil || n != 0 {
		t.Fatalf("after a refund of a missing key, EXISTS = %d, %v; want 0", n, err)
	}
	if d := s.Peek("k"); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("Peek after the refund = %+v, want a full bucket", d)
	}
	if _, err := s.AllowTier("k", tier, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.RefundTier("k", tier, 4); err != nil {
		t.Fatal(err)
	}
	d, err := s.AllowTier("k", tier, 10)
	if want := (keyrate.Decision{Allowed: true, Policy: "pro", Limit: keyrate.PerSecond(10), ResetAfter: 6 * time.Minute, WindowResetAfter: time.Second}); d != want || err != nil {
		t.Fatalf("after spending 4 and refunding them, AllowTier(10) = %+v, %v; want %+v", d, err, want)
	}
	if st := s.Stats(); st.Calls != 5 || st.Errors != 0 {
		t.Errorf("Stats = %+v, want 5 calls (a Peek, 2 AllowTier, 2 RefundTier) and no errors", st)
	}
}

// TestFallbackPolicies: under FallbackLocal the in-process store that
// answers while Redis is down enforces the same policies, tiers and
// function, follows SetPolicy, and takes refunds; WithFallbackLimit
// replaces its default policy only, and SetPolicy of the default leaves
// that limit alone.
func TestFallbackPolicies(t *testing.T) {
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(100), keyrate.PerHour(3)}}
	s := mustNew(t, newClient(t, unreachable), keyrate.PerHour(50),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackLimit(keyrate.PerHour(2)),
		redisbucket.WithTimeSource(clock.NewManual(start)), redisbucket.WithTimeout(20*time.Millisecond),
		keyrate.WithPolicies(pro), keyrate.WithPolicyFunc(func(key string) string {
			if strings.HasPrefix(key, "pro-") {
				return "pro"
			}
			return ""
		}))
	admitted := func(n int, allow func() (keyrate.Decision, error)) int {
		t.Helper()
		k := 0
		for range n {
			d, err := allow()
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				k++
			}
		}
		return k
	}
	tier, _ := s.Tier("pro")
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowTier("a", tier, 1) }); got != 3 {
		t.Errorf("AllowTier(pro) during an outage admitted %d of 5, want 3: the fallback's pro policy, whose second window holds 3", got)
	}
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowN("pro-b", 1) }); got != 3 {
		t.Errorf("AllowN of a key WithPolicyFunc puts under pro admitted %d of 5, want 3", got)
	}
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowN("c", 1) }); got != 2 {
		t.Errorf("AllowN under the default admitted %d of 5, want 2: WithFallbackLimit", got)
	}
	if err := s.RefundTier("a", tier, 2); err != nil {
		t.Errorf("RefundTier during an outage = %v, want nil: the fallback takes it", err)
	}
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowTier("a", tier, 1) }); got != 2 {
		t.Errorf("after refunding 2, AllowTier admitted %d, want 2", got)
	}
	if err := s.SetPolicy(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(100), keyrate.PerHour(5)}}); err != nil {
		t.Fatal(err)
	}
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowTier("d", tier, 1) }); got != 5 {
		t.Errorf("after SetPolicy(pro: 5 an hour), AllowTier admitted %d of 5 on a new key, want 5", got)
	}
	if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerHour(60)}}); err != nil {
		t.Fatal(err)
	}
	if got := admitted(5, func() (keyrate.Decision, error) { return s.AllowN("e", 1) }); got != 2 {
		t.Errorf("after SetPolicy(default), AllowN admitted %d of 5, want still 2: WithFallbackLimit", got)
	}
}

// v1Script is the script of the version of the store before policies,
// which kept one window as "a:b" (testdata/gcra-v1.lua).
var v1Script = func() *redis.Script {
	b, err := os.ReadFile("testdata/gcra-v1.lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}()

// v1 runs the script of the version before policies on key at reading now,
// spending cost (0: peek), and returns whether it allowed the spend, the
// debt it read or left (in µs and ticks) and whether it found the value
// malformed.
func v1(t *testing.T, c redis.UniversalClient, key string, l keyrate.Limit, now time.Duration, cost int) []int64 {
	t.Helper()
	k, i, f := redisbucket.ScriptUnits(l)
	res, err := v1Script.Run(t.Context(), c, []string{key}, int64(now/time.Microsecond), cost, k, i, f, time.Hour.Milliseconds()).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRollingDeploy runs the script of the version before policies and
// this store on the same keys, as during a rolling deploy. This store
// reads a one-window value of that version as window 0 of its default
// policy, and carries it over to a policy of several windows or to a
// tier as keyrate does. That version reads every value this store
// writes (each records its limits) as malformed: an empty bucket, which
// never admits more than the limit. (TestOldProcessReadsNewValue runs
// the version with policies, which reads them.)
func TestRollingDeploy(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	for _, limit := range []keyrate.Limit{keyrate.PerHour(100), {Rate: 7, Per: 3 * time.Second, Burst: 5}} {
		t.Run(limit.String(), func(t *testing.T) {
			clk := clock.NewManual(start)
			prefix := uniquePrefix(t)
			pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(30)}}
			opts := []keyrate.Option{keyrate.WithPolicies(pro), keyrate.WithPolicyFunc(func(key string) string {
				if strings.HasPrefix(key, "pro-") {
					return "pro"
				}
				return ""
			})}
			s := mustNew(t, client, limit, append(opts, redisbucket.WithTimeSource(clk),
				redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))...)
			ref := newRefStore(t, limit, clk, opts...)
			def := ref.rules(t, keyrate.DefaultPolicy)
			for _, key := range []string{"k", "pro-k"} {
				// The previous version spends 2, and 1 more 100ms later.
				v1(t, client, prefix+key, limit, clk.Now(), 2)
				ref.allow(def, key, 2)
				clk.Advance(100 * time.Millisecond)
				if res := v1(t, client, prefix+key, limit, clk.Now(), 1); res[0] != 1 || res[3] != 0 {
					t.Fatalf("%s: the previous version's spend = %v, want allowed", key, res)
				}
				ref.allow(def, key, 1)
			}
			clk.Advance(time.Second)
			// This store reads it as the default policy's window 0.
			if got, want := s.Peek("k"), ref.peek(def, "k"); got != want {
				t.Fatalf("Peek of the previous version's value = %+v, want %+v", got, want)
			}
			got, err := s.AllowN("k", 1)
			if want, _ := ref.allow(def, "k", 1); got != want || err != nil {
				t.Fatalf("AllowN on the previous version's value = %+v, %v; want %+v", got, err, want)
			}
			// It writes its value under its limits' descriptor, which the
			// previous version reads as malformed: an empty bucket, which
			// never admits more than the limit.
			v, err := client.Get(t.Context(), prefix+"k").Result()
			if desc, _ := redisbucket.ScriptWindow(limit); err != nil || !strings.HasPrefix(v, desc+"/") {
				t.Fatalf("value after AllowN = %q, %v; want it under its descriptor %s", v, err, desc)
			}
			k, _, fill := redisbucket.ScriptUnits(limit)
			if res := v1(t, client, prefix+"k", limit, clk.Now(), 0); res[3] != 1 || res[1]*k+res[2] != fill {
				t.Fatalf("the previous version reads %q as %v; want it malformed, an empty bucket (a debt of %d ticks)", v, res, fill)
			}
			// A key under a tier carries the old value over to its
			// windows, as keyrate does.
			got, err = s.AllowN("pro-k", 1)
			if want, _ := ref.allow(ref.rules(t, "pro"), "pro-k", 1); got != want || err != nil {
				t.Fatalf("AllowN under pro on the previous version's value = %+v, %v; want %+v", got, err, want)
			}
			// And so does the default policy, changed to two windows.
			two := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit, keyrate.PerMinute(20)}}
			if err := s.SetPolicy(two); err != nil {
				t.Fatal(err)
			}
			if err := ref.pols.Set(two); err != nil {
				t.Fatal(err)
			}
			got, err = s.AllowN("k", 1)
			if want, _ := ref.allow(ref.rules(t, keyrate.DefaultPolicy), "k", 1); got != want || err != nil {
				t.Fatalf("AllowN under the two-window default = %+v, %v; want %+v", got, err, want)
			}
			// The previous version cannot read that value: it heals it as a
			// malformed one, to an empty bucket, never admitting more.
			if res := v1(t, client, prefix+"k", limit, clk.Now(), 0); res[0] != 0 || res[3] != 1 {
				t.Fatalf("the previous version's peek at a two-window value = %v, want a malformed, empty bucket", res)
			}
		})
	}
}

// TestSetPolicyUnderLoad changes a tier's policy back and forth, from one
// goroutine, while goroutines of two stores spend from one key under it,
// on a frozen clock: no call fails, and since a change carries the tokens
// spent over whole, the key is never admitted more than the larger burst,
// however the changes and the spends interleave.
func TestSetPolicyUnderLoad(t *testing.T) {
	srv := server(t)
	small := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(10), {Rate: 7, Per: 3 * time.Hour, Burst: 12}}}
	large := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(20), keyrate.PerHour(30)}}
	clk := clock.NewManual(start)
	prefix := uniquePrefix(t)
	var stores []*redisbucket.Store
	for range 2 {
		stores = append(stores, mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(1),
			keyrate.WithPolicies(small), redisbucket.WithTimeSource(clk),
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout)))
	}
	var admitted atomic.Int64
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, 16)
	for _, s := range stores {
		tier, err := s.Tier("pro")
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-release
				for range 20 {
					d, err := s.AllowTier("k", tier, 1)
					if err != nil {
						errs <- err
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
	}
	ready.Add(1)
	done.Add(1)
	go func() {
		defer done.Done()
		ready.Done()
		<-release
		for i := range 20 {
			p := []keyrate.Policy{large, small}[i%2]
			for _, s := range stores {
				if err := s.SetPolicy(p); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	ready.Wait()
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := admitted.Load(); n > 20 || n < 10 {
		t.Fatalf("admitted %d of 160 calls, want from 10 (the smaller burst) to 20 (the larger)", n)
	}
}
