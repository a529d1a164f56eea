package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
)

// RunPolicies checks keyrate.PolicyLimiter on a bounded store: several
// windows all or nothing, tiers, runtime changes and refunds, each against
// rules.Rules applied to a plain map (the reference), and under
// concurrency against exact counts.
func RunPolicies(t *testing.T, b Bounded) {
	t.Run("TwoWindowSteps", func(t *testing.T) { testTwoWindowSteps(t, b) })
	t.Run("Differential", func(t *testing.T) { testPolicyDifferential(t, b) })
	t.Run("BadInput", func(t *testing.T) { testPolicyBadInput(t, b) })
	t.Run("Unlimited", func(t *testing.T) { testUnlimited(t, b) })
	t.Run("ConcurrentWindows", func(t *testing.T) { testConcurrentWindows(t, b) })
	t.Run("ConcurrentRefunds", func(t *testing.T) { testConcurrentRefunds(t, b) })
	t.Run("RefundCapsAtBurst", func(t *testing.T) { testRefundCapsAtBurst(t, b) })
	t.Run("ConcurrentChanges", func(t *testing.T) { testConcurrentChanges(t, b) })
	t.Run("MovedUnderCaller", func(t *testing.T) { testMovedUnderCaller(t, b) })
	t.Run("ZeroAllocs", func(t *testing.T) { testPolicyZeroAllocs(t, b) })
}

// policyStore is an in-process store: a PolicyLimiter that bounds its
// memory.
type policyStore interface {
	keyrate.PolicyLimiter
	keyrate.BoundedLimiter
}

// openPolicies builds b with opts on a fresh manual clock reading start.
func openPolicies(t *testing.T, b Bounded, limit keyrate.Limit, opts ...keyrate.Option) (policyStore, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	l, err := b.New(t, limit, clk, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	pl, ok := l.(policyStore)
	if !ok {
		t.Fatalf("%T does not implement keyrate.PolicyLimiter", l)
	}
	return pl, clk
}

// twoWindows is 10 a second (burst 10) and 20 a minute (burst 20).
var twoWindows = keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(20)}}

func testTwoWindowSteps(t *testing.T, b Bounded) {
	l, clk := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(twoWindows))
	pro, err := l.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	if pro.Name() != "pro" {
		t.Fatalf("Tier(pro).Name() = %q", pro.Name())
	}
	sec, min := twoWindows.Limits[0], twoWindows.Limits[1]
	steps := []struct {
		at   time.Duration
		cost int
		want keyrate.Decision
	}{
		// 10 at once: the second window (20 a minute) has 10 left.
		0: {0, 10, keyrate.Decision{Allowed: true, Policy: "pro", Window: 0, Limit: sec, Remaining: 0, ResetAfter: 30 * time.Second, WindowResetAfter: time.Second}},
		// The 11th is denied by the first window, with the second's state
		// untouched: 100ms until the first holds one.
		1: {0, 1, keyrate.Decision{Policy: "pro", Window: 0, Limit: sec, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: 30 * time.Second, WindowResetAfter: time.Second}},
		// A second later the first window is full again; the second (a
		// token every 3s) has refilled a third of one: 10.33 left, and
		// both windows end at 0 (the first is reported).
		2: {time.Second, 10, keyrate.Decision{Allowed: true, Policy: "pro", Window: 0, Limit: sec, Remaining: 0, ResetAfter: 59 * time.Second, WindowResetAfter: time.Second}},
		// At +2s the first window is full, but the minute quota holds
		// 0.66 tokens: the second window denies, and the request waits
		// for it (1s more), not for the first.
		3: {2 * time.Second, 1, keyrate.Decision{Policy: "pro", Window: 1, Limit: min, Remaining: 0, RetryAfter: time.Second, ResetAfter: 58 * time.Second, WindowResetAfter: 58 * time.Second}},
		// At +3s the minute window holds one: allowed, and it is the
		// window with the fewest tokens left.
		4: {3 * time.Second, 1, keyrate.Decision{Allowed: true, Policy: "pro", Window: 1, Limit: min, Remaining: 0, ResetAfter: time.Minute, WindowResetAfter: time.Minute}},
	}
	for i, st := range steps {
		clk.Set(start + st.at)
		got, err := l.AllowTier("k", pro, st.cost)
		if err != nil || got != st.want {
			t.Fatalf("step %d: AllowTier(k, pro, %d) at +%v = %+v, %v; want %+v", i, st.cost, st.at, got, err, st.want)
		}
	}
	// A denied request spent from no window: the refund of the last
	// request's one token restores the minute window's exactly.
	if err := l.RefundTier("k", pro, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := l.AllowTier("k", pro, 1); err != nil || !got.Allowed || got.Remaining != 0 || got.Window != 1 {
		t.Fatalf("after a refund of 1, AllowTier = %+v, %v; want allowed with the minute window at 0", got, err)
	}
}

// refStore is the reference: rules.Rules applied to a plain map, with a
// key's states carried over (rules.Rules.Carry) when its policy changes.
// Its policies are compiled by a rules.Policies, as a store's are, so
// that they share one epoch.
type refStore struct {
	clk  *clock.Manual
	pols *rules.Policies
	keys map[string]refBucket
}

type refBucket struct {
	rs *rules.Rules
	s  []rules.State
}

func newRefStore(t *testing.T, clk *clock.Manual, ps []keyrate.Policy) *refStore {
	pols, err := rules.NewPolicies(keyrate.PerSecond(1), config.Settings{Clock: clk, Policies: ps})
	if err != nil {
		t.Fatal(err)
	}
	return &refStore{clk: clk, pols: pols, keys: map[string]refBucket{}}
}

func (r *refStore) set(t *testing.T, p keyrate.Policy) {
	if err := r.pols.Set(p); err != nil {
		t.Fatal(err)
	}
}

func (r *refStore) rules(name string) *rules.Rules {
	tier, err := r.pols.Tier(name)
	if err != nil {
		panic(err)
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
			r := rs.Rule(i)
			s[i] = r.FullState(r.Ticks(now))
		}
	case b.rs == rs:
		copy(s, b.s)
	default:
		rs.Carry(b.rs, b.s, now, s)
	}
	return s
}

func (r *refStore) allow(key, policy string, cost int) keyrate.Decision {
	rs := r.rules(policy)
	now := r.clk.Now()
	s := r.bucket(key, rs, now)
	denied := rs.Take(s, now, cost)
	r.keys[key] = refBucket{rs, s}
	return rs.Decide(s, now, cost, denied)
}

func (r *refStore) refund(key, policy string, cost int) {
	rs := r.rules(policy)
	if _, ok := r.keys[key]; !ok {
		return
	}
	now := r.clk.Now()
	s := r.bucket(key, rs, now)
	rs.Refund(s, now, cost)
	r.keys[key] = refBucket{rs, s}
}

func (r *refStore) peek(key, policy string) keyrate.Decision {
	rs := r.rules(policy)
	now := r.clk.Now()
	return rs.Peek(r.bucket(key, rs, now), now)
}

// testPolicyDifferential drives a store and the reference with the same
// random operations (requests under random tiers and costs, refunds,
// policy changes, sweeps, time steps) and compares every decision: the
// store must decide exactly as rules.Rules does, and eviction must
// change nothing.
func testPolicyDifferential(t *testing.T, b Bounded) {
	// Every limit is exact (whole-nanosecond token intervals), so that
	// the reference's different epoch cannot round differently.
	choices := [][]keyrate.Limit{
		{keyrate.PerSecond(5)},
		{keyrate.PerSecond(10), keyrate.PerMinute(30)},
		{{Rate: 3, Per: 10 * time.Second, Burst: 7}},
		{keyrate.PerSecond(4).WithBurst(8), keyrate.PerMinute(50), {Rate: 1, Per: time.Hour, Burst: 100}},
		{keyrate.Every(250 * time.Millisecond)},
	}
	names := []string{keyrate.DefaultPolicy, "free", "pro"}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			pick := func(name string) keyrate.Policy {
				return keyrate.Policy{Name: name, Limits: choices[rng.IntN(len(choices))]}
			}
			var ps []keyrate.Policy
			for _, n := range names {
				ps = append(ps, pick(n))
			}
			opts := []keyrate.Option{keyrate.WithPolicies(ps...)}
			if seed%2 == 0 {
				opts = append(opts, keyrate.WithHashedKeys())
			}
			l, clk := openPolicies(t, b, keyrate.PerSecond(1), opts...)
			ref := newRefStore(t, clk, ps)
			keys := []string{"a", "b", "c", ""}
			for i := 0; i < 3000; i++ {
				key, name := keys[rng.IntN(len(keys))], names[rng.IntN(len(names))]
				tier, err := l.Tier(name)
				if err != nil {
					t.Fatal(err)
				}
				switch op := rng.IntN(20); {
				case op < 11:
					minBurst := ref.rules(name).Policy().Limits[0].Burst
					for _, lim := range ref.rules(name).Policy().Limits {
						minBurst = min(minBurst, lim.Burst)
					}
					cost := 1 + rng.IntN(minBurst)
					got, err := l.AllowTier(key, tier, cost)
					want := ref.allow(key, name, cost)
					if err != nil || got != want {
						t.Fatalf("op %d: AllowTier(%q, %s, %d) at +%v = %+v, %v; want %+v", i, key, name, cost, clk.Now()-start, got, err, want)
					}
				case op < 13:
					got, err := l.AllowTier(key, tier, 1)
					if err != nil {
						t.Fatal(err)
					}
					want := ref.allow(key, name, 1)
					if got != want {
						t.Fatalf("op %d: AllowTier(%q, %s, 1) at +%v = %+v; want %+v", i, key, name, clk.Now()-start, got, want)
					}
					if want.Allowed { // give it straight back: exact
						if err := l.RefundTier(key, tier, 1); err != nil {
							t.Fatal(err)
						}
						ref.refund(key, name, 1)
					}
				case op < 14:
					if err := l.RefundTier(key, tier, 1); err != nil {
						t.Fatal(err)
					}
					ref.refund(key, name, 1)
				case op < 15:
					p := pick(name)
					if err := l.SetPolicy(p); err != nil {
						t.Fatal(err)
					}
					ref.set(t, p)
				case op < 16:
					l.Sweep()
				case op < 17:
					if got, want := l.Peek(key), ref.peek(key, keyrate.DefaultPolicy); got != want {
						t.Fatalf("op %d: Peek(%q) at +%v = %+v; want %+v", i, key, clk.Now()-start, got, want)
					}
				default:
					clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
				}
			}
		})
	}
}

func testPolicyBadInput(t *testing.T, b Bounded) {
	bad := []struct {
		name string
		p    keyrate.Policy
		want []error
		msg  string
	}{
		{"empty", keyrate.Policy{Name: "x"}, []error{keyrate.ErrInvalidPolicy}, `"x" has no limits`},
		{"no name", keyrate.Policy{Limits: []keyrate.Limit{keyrate.PerSecond(1)}}, []error{keyrate.ErrInvalidPolicy}, "name is empty"},
		{"too many", keyrate.Policy{Name: "x", Limits: make([]keyrate.Limit, 9)}, []error{keyrate.ErrInvalidPolicy}, "9 limits, above the most of 8"},
		{"bad window", keyrate.Policy{Name: "x", Limits: []keyrate.Limit{keyrate.PerSecond(1), {Rate: 1, Per: time.Second}}}, []error{keyrate.ErrInvalidPolicy, keyrate.ErrInvalidLimit}, "window 1"},
	}
	for _, c := range bad {
		_, err := b.New(t, keyrate.PerSecond(1), clock.NewManual(start), keyrate.WithPolicies(c.p))
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("New with policy %s: %v, want %v", c.name, err, w)
			}
		}
		if err != nil && !strings.Contains(err.Error(), c.msg) {
			t.Errorf("New with policy %s: %q does not say %q", c.name, err, c.msg)
		}
		namesPackageOnce(t, "New with policy "+c.name, err)
	}
	l, _ := openPolicies(t, b, keyrate.PerSecond(5), keyrate.WithPolicies(twoWindows),
		keyrate.WithPolicyFunc(func(key string) string {
			if key == "ghost" {
				return "gold"
			}
			return ""
		}))
	for _, c := range bad {
		err := l.SetPolicy(c.p)
		if !errors.Is(err, keyrate.ErrInvalidPolicy) {
			t.Errorf("SetPolicy(%s) = %v, want ErrInvalidPolicy", c.name, err)
		}
		namesPackageOnce(t, "SetPolicy("+c.name+")", err)
	}
	if _, err := l.Tier("gold"); !errors.Is(err, keyrate.ErrUnknownPolicy) || !strings.Contains(err.Error(), `"gold"`) {
		t.Errorf("Tier(gold) = %v, want ErrUnknownPolicy naming it", err)
	}
	if _, err := l.AllowN("ghost", 1); !errors.Is(err, keyrate.ErrUnknownPolicy) || !strings.Contains(err.Error(), `"gold"`) {
		t.Errorf("AllowN(ghost), which WithPolicyFunc puts under gold = %v, want ErrUnknownPolicy naming it", err)
	}
	if l.Allow("ghost") {
		t.Error("Allow(ghost) under an unknown policy = true")
	}
	if l.Len() != 0 {
		t.Errorf("Len = %d after requests that all failed, want 0", l.Len())
	}
	pro, _ := l.Tier("pro")
	for _, c := range []struct {
		cost int
		want error
		msg  string
	}{{0, keyrate.ErrInvalidCost, "cost 0"}, {-1, keyrate.ErrInvalidCost, "cost -1"}, {11, keyrate.ErrCostExceedsBurst, "cost 11 is above the burst of 10"}} {
		if err := l.RefundTier("k", pro, c.cost); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("RefundTier(cost %d) = %v, want %v saying %q", c.cost, err, c.want, c.msg)
		}
		if _, err := l.AllowTier("k", pro, c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowTier(cost %d) = %v, want %v", c.cost, err, c.want)
		}
	}
	if err := l.Refund("k", 6); !errors.Is(err, keyrate.ErrCostExceedsBurst) {
		t.Errorf("Refund(k, 6) over the default burst of 5 = %v, want ErrCostExceedsBurst", err)
	}
	other, _ := openPolicies(t, b, keyrate.PerSecond(5), keyrate.WithPolicies(twoWindows))
	foreign, _ := other.Tier("pro")
	if _, err := l.AllowTier("k", foreign, 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
		t.Errorf("AllowTier with another store's Tier = %v, want ErrUnknownPolicy", err)
	}
	if _, err := b.New(t, keyrate.PerSecond(1), clock.NewManual(start), keyrate.WithPolicies(twoWindows, twoWindows)); !errors.Is(err, keyrate.ErrInvalidPolicy) {
		t.Errorf("New with two policies named pro = %v, want ErrInvalidPolicy", err)
	}
	if _, err := b.New(t, keyrate.PerSecond(1), clock.NewManual(start), keyrate.WithPolicyFunc(nil)); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Errorf("New with WithPolicyFunc(nil) = %v, want ErrInvalidOption", err)
	}
}

func testUnlimited(t *testing.T, b Bounded) {
	l, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(keyrate.Unlimited("internal")),
		keyrate.WithPolicyFunc(func(key string) string {
			if strings.HasPrefix(key, "svc-") {
				return "internal"
			}
			return ""
		}))
	for i := 0; i < 1000; i++ {
		d, err := l.AllowN("svc-a", 1_000_000)
		if err != nil || !d.Allowed || d.Policy != "internal" {
			t.Fatalf("request %d under an unlimited policy = %+v, %v", i, d, err)
		}
	}
	if l.Len() != 0 {
		t.Errorf("Len = %d after unlimited requests, want 0: they store nothing", l.Len())
	}
	if !l.Allow("user") || l.Allow("user") {
		t.Error("the default policy (1 a second) is not enforced beside the unlimited one")
	}
}

// testConcurrentWindows: barrier-started goroutines on one key under a
// two-window policy with a frozen clock admit exactly what the tighter
// window holds, then exactly what each window has refilled.
func testConcurrentWindows(t *testing.T, b Bounded) {
	eachProcs(t, func(t *testing.T) {
		p := keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerSecond(100).WithBurst(50), keyrate.PerMinute(60).WithBurst(30)}}
		l, clk := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(p))
		tier, _ := l.Tier("p")
		try := func() int64 {
			return hammer(8, 20, func(_, _ int) bool {
				d, err := l.AllowTier("k", tier, 1)
				return err == nil && d.Allowed
			})
		}
		if got := try(); got != 30 {
			t.Fatalf("admitted %d at once, want 30: the minute window's burst", got)
		}
		clk.Advance(10 * time.Second) // the minute window refills 10
		if got := try(); got != 10 {
			t.Fatalf("admitted %d after 10s, want 10", got)
		}
	})
}

// testConcurrentRefunds: spends and refunds interleaved on one key with a
// frozen clock leave it holding exactly Burst − (admitted − refunded).
func testConcurrentRefunds(t *testing.T, b Bounded) {
	for _, p := range []keyrate.Policy{
		{Name: "one", Limits: []keyrate.Limit{keyrate.PerMinute(40)}},
		{Name: "two", Limits: []keyrate.Limit{keyrate.PerMinute(40), keyrate.PerHour(60)}},
	} {
		t.Run(p.Name, func(t *testing.T) {
			l, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(p))
			tier, _ := l.Tier(p.Name)
			var admitted, refunded atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 300; i++ {
						d, err := l.AllowTier("k", tier, 2)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(2)
							if i%3 != 0 {
								// Counted before it is made, so that
								// admitted − refunded never exceeds the
								// tokens truly out: another goroutine may
								// spend a refund before this one counts it.
								refunded.Add(2)
								if err := l.RefundTier("k", tier, 2); err != nil {
									t.Error(err)
									return
								}
							}
						}
						if net := admitted.Load() - refunded.Load(); net > 40 {
							t.Errorf("admitted − refunded = %d, above the burst of 40", net)
							return
						}
					}
				}()
			}
			wg.Wait()
			net := int(admitted.Load() - refunded.Load())
			d, _ := l.AllowTier("k", tier, 1)
			if want := 40 - net - 1; d.Remaining != want && !(want < 0 && !d.Allowed) {
				t.Fatalf("after admitting %d and refunding %d, a request leaves %d, want %d: a refund was lost or doubled",
					admitted.Load(), refunded.Load(), d.Remaining, want)
			}
		})
	}
}

// testConcurrentChanges: while goroutines hammer one key with a frozen
// clock, the policy flips between two limits; every decision names one of
// them, and the key never spends more than the larger Burst, since a
// change never hands it tokens it did not hold.
func testConcurrentChanges(t *testing.T, b Bounded) {
	small := keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerMinute(10)}}
	large := keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerMinute(25), keyrate.PerHour(1000)}}
	l, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(small))
	tier, _ := l.Tier("p")
	if _, err := l.AllowTier("k", tier, 1); err != nil { // not full: carried, not new
		t.Fatal(err)
	}
	var admitted atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			p := small
			if i%2 == 1 {
				p = large
			}
			if err := l.SetPolicy(p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	n := hammer(8, 200, func(_, _ int) bool {
		d, err := l.AllowTier("k", tier, 1)
		if err != nil || (d.Limit != small.Limits[0] && d.Limit != large.Limits[0] && d.Limit != large.Limits[1]) {
			t.Errorf("AllowTier during changes = %+v, %v", d, err)
		}
		return d.Allowed
	})
	close(done)
	wg.Wait()
	admitted.Add(n)
	if got := admitted.Load() + 1; got > 25 {
		t.Fatalf("the key spent %d with a frozen clock while its policy flipped, above the larger burst of 25", got)
	}
}

func testPolicyZeroAllocs(t *testing.T, b Bounded) {
	l, _ := openPolicies(t, b, keyrate.PerSecond(1e6), keyrate.WithPolicies(
		keyrate.Policy{Name: "two", Limits: []keyrate.Limit{keyrate.PerSecond(1e6), keyrate.PerHour(1e9)}},
		keyrate.Unlimited("free")))
	two, _ := l.Tier("two")
	free, _ := l.Tier("free")
	l.AllowTier("k", two, 1)
	if n := testing.AllocsPerRun(200, func() {
		l.AllowTier("k", two, 1)
		l.RefundTier("k", two, 1)
		l.AllowTier("k", free, 1)
		l.Tier("two")
	}); n != 0 {
		t.Fatalf("AllowTier/RefundTier/Tier on a known key: %v allocations per run, want 0", n)
	}
}

// testMovedUnderCaller: a request that read the clock, and then finds that
// another request moved its key to another tier (retiring the bucket it
// looked up), spends from the key's current bucket, not the retired one,
// so both spends count. The hook runs the other request between the first
// one's reading and its spend, every run.
func testMovedUnderCaller(t *testing.T, b Bounded) {
	for _, windows := range [][]keyrate.Limit{
		{keyrate.PerMinute(10)},
		{keyrate.PerMinute(10), keyrate.PerHour(100)},
	} {
		t.Run(fmt.Sprint("windows=", len(windows)), func(t *testing.T) {
			clk := NewHookClock(start)
			l, err := b.New(t, keyrate.PerSecond(1), clk.Manual, keyrate.WithClock(clk), keyrate.WithPolicies(
				keyrate.Policy{Name: "a", Limits: windows},
				keyrate.Policy{Name: "b", Limits: windows},
			))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ps := l.(keyrate.PolicyLimiter)
			ta, _ := ps.Tier("a")
			tb, _ := ps.Tier("b")
			if d, err := ps.AllowTier("k", ta, 1); err != nil || !d.Allowed {
				t.Fatalf("first request = %+v, %v", d, err)
			}
			var moved keyrate.Decision
			clk.AtNextReading(func() { moved, _ = ps.AllowTier("k", tb, 4) })
			got, err := ps.AllowTier("k", ta, 3)
			if !clk.Fired() || !moved.Allowed || moved.Remaining != 5 {
				t.Fatalf("the move to tier b did not run as planned (fired %v, %+v)", clk.Fired(), moved)
			}
			if err != nil || !got.Allowed || got.Remaining != 2 {
				t.Fatalf("AllowTier(k, a, 3) after k moved to b under it = %+v, %v; want allowed with 2 left (10 - 1 - 4 - 3)", got, err)
			}
			if d, _ := ps.AllowTier("k", tb, 3); d.Allowed {
				t.Fatalf("a third request of 3 with 2 left = %+v, want denied", d)
			}
		})
	}
}

// namesPackageOnce fails t if err's message says "keyrate: " more than
// once: an error wrapping two of keyrate's (ErrInvalidPolicy and
// ErrInvalidLimit, say) names the package at its start only.
func namesPackageOnce(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && strings.Count(err.Error(), "keyrate: ") > 1 {
		t.Errorf("%s: %q names the package more than once", what, err)
	}
}
