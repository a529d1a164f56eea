package rules_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
)

// Two policies for the tests of Policies.
var (
	tierPro  = keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(20)}}
	tierFree = keyrate.Unlimited("free")
)

// newPolicies compiles a store's policies from limit and opts, as a
// store's New does, on clk.
func newPolicies(t *testing.T, clk clock.Clock, limit keyrate.Limit, opts ...keyrate.Option) *rules.Policies {
	t.Helper()
	set, err := config.Configure(nil, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	ps, err := rules.NewPolicies(limit, set)
	if err != nil {
		t.Fatalf("NewPolicies: %v", err)
	}
	return ps
}

// listed returns ps's policies as sorted strings.
func listed(ps *rules.Policies) []string {
	var out []string
	for _, p := range ps.List() {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

// tierRules returns the current version of the policy named name.
func tierRules(t *testing.T, ps *rules.Policies, name string) *rules.Rules {
	t.Helper()
	tier, err := ps.Tier(name)
	if err != nil {
		t.Fatalf("Tier(%q): %v", name, err)
	}
	if tier.Name() != name {
		t.Fatalf("Tier(%q).Name() = %q", name, tier.Name())
	}
	rs, err := ps.Rules(tier)
	if err != nil {
		t.Fatalf("Rules(Tier(%q)): %v", name, err)
	}
	return rs
}

// TestPoliciesDefault: the Limit given to New is the default policy, named
// DefaultPolicy, which the zero Tier and every key without a policy
// function get.
func TestPoliciesDefault(t *testing.T) {
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicies(tierPro, tierFree))
	def := ps.Default()
	if got, want := def.Policy().String(), `"default": 5 per 1s, burst 5`; got != want {
		t.Errorf("Default().Policy() = %s, want %s", got, want)
	}
	if got := (keyrate.Tier{}).Name(); got != keyrate.DefaultPolicy {
		t.Errorf("Tier{}.Name() = %q, want %q", got, keyrate.DefaultPolicy)
	}
	if rs, err := ps.Rules(keyrate.Tier{}); rs != def || err != nil {
		t.Errorf("Rules(Tier{}) = %v, %v; want the default", rs.Policy(), err)
	}
	if rs := tierRules(t, ps, keyrate.DefaultPolicy); rs != def {
		t.Errorf("Rules(Tier(default)) = %v, want the default", rs.Policy())
	}
	if rs, err := ps.ForKey("alice"); rs != def || err != nil {
		t.Errorf("ForKey(alice) without a policy function = %v, %v; want the default", rs.Policy(), err)
	}
	if rs := tierRules(t, ps, "pro"); rs.Policy().String() != tierPro.String() {
		t.Errorf("Rules(Tier(pro)) = %v, want %v", rs.Policy(), tierPro)
	}
	if rs := tierRules(t, ps, "free"); !rs.Unlimited() || rs.Name() != "free" {
		t.Errorf("Rules(Tier(free)) = %v, want unlimited", rs.Policy())
	}
	want := []string{`"default": 5 per 1s, burst 5`, `"free": unlimited`, tierPro.String()}
	slices.Sort(want)
	if got := listed(ps); !slices.Equal(got, want) {
		t.Errorf("List() = %q, want %q", got, want)
	}
}

// TestPoliciesDefaultReplaced: a policy named DefaultPolicy in
// WithPolicies replaces the Limit given to New.
func TestPoliciesDefaultReplaced(t *testing.T) {
	two := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: tierPro.Limits}
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicies(two))
	if got := ps.Default().Policy().String(); got != two.String() {
		t.Errorf("Default() = %s, want %s", got, two)
	}
	if got := len(ps.List()); got != 1 {
		t.Errorf("List() has %d policies, want 1", got)
	}
}

// TestPoliciesErrors: each error wraps its sentinel and names the value.
func TestPoliciesErrors(t *testing.T) {
	clk := clock.NewManual(0)
	configure := func(opts ...keyrate.Option) (*rules.Policies, error) {
		set, err := config.Configure(nil, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
		if err != nil {
			return nil, err
		}
		return rules.NewPolicies(keyrate.PerSecond(5), set)
	}

	_, err := rules.NewPolicies(keyrate.Limit{Rate: 5, Per: time.Second}, config.Settings{Clock: clk})
	checkErr(t, "NewPolicies(an invalid limit)", err, []error{keyrate.ErrInvalidLimit}, "Burst 0 is below 1")

	_, err = configure(keyrate.WithPolicies(tierPro, keyrate.Policy{Name: "gold"}))
	checkErr(t, "NewPolicies(a policy without limits)", err, invalidPolicy, `"gold"`, "no limits")

	_, err = configure(keyrate.WithPolicies(keyrate.Policy{Name: "gold", Limits: []keyrate.Limit{keyrate.PerSecond(0)}}))
	checkErr(t, "NewPolicies(an invalid window)", err, invalidWindow, `"gold"`, "window 0", "Rate 0")

	for name, opts := range map[string][]keyrate.Option{
		"one WithPolicies": {keyrate.WithPolicies(tierPro, tierFree, keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(1)}})},
		"two WithPolicies": {keyrate.WithPolicies(tierPro), keyrate.WithPolicies(tierPro)},
	} {
		_, err = configure(opts...)
		checkErr(t, "NewPolicies(two policies named pro, "+name+")", err, invalidPolicy, `two policies are named "pro"`)
	}

	_, err = configure(keyrate.WithPolicyFunc(nil))
	checkErr(t, "Configure(WithPolicyFunc(nil))", err, []error{keyrate.ErrInvalidOption}, "WithPolicyFunc", "nil function")

	ps, err := configure(keyrate.WithPolicies(tierPro), keyrate.WithPolicyFunc(func(key string) string { return "gold-" + key }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ps.Tier("gold")
	checkErr(t, `Tier("gold")`, err, []error{keyrate.ErrUnknownPolicy}, `"gold"`)
	_, err = ps.ForKey("alice")
	checkErr(t, "ForKey(alice) with a function naming gold-alice", err, []error{keyrate.ErrUnknownPolicy}, `"gold-alice"`, `"alice"`)

	other, err := configure(keyrate.WithPolicies(tierPro))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ps.Rules(theirs)
	checkErr(t, "Rules(a Tier of another Policies)", err, []error{keyrate.ErrUnknownPolicy}, `"pro"`, "another")
	if rs != nil {
		t.Errorf("Rules(a Tier of another Policies) = %v, want nil", rs.Policy())
	}
}

// TestPoliciesSet: Set replaces a policy in place, so that a Tier taken
// before sees the new version; adds a new one; and changes nothing when
// the policy is invalid.
func TestPoliciesSet(t *testing.T) {
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicies(tierPro))
	tier, err := ps.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	old, _ := ps.Rules(tier)

	pro2 := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(100)}}
	if err := ps.Set(pro2); err != nil {
		t.Fatalf("Set(%v): %v", pro2, err)
	}
	rs, err := ps.Rules(tier)
	if err != nil || rs == old || rs.Policy().String() != pro2.String() {
		t.Fatalf("Rules(a Tier taken before Set) = %v, %v; want %v", rs.Policy(), err, pro2)
	}
	if tier.Name() != "pro" {
		t.Errorf("Tier.Name() = %q after Set", tier.Name())
	}

	// Invalid policies change nothing.
	before := listed(ps)
	for _, p := range []keyrate.Policy{
		{Name: "pro"},
		{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), {Rate: 1, Per: time.Second}}},
		{Name: "pro", Unlimited: true, Limits: []keyrate.Limit{keyrate.PerSecond(1)}},
		{Name: "", Limits: []keyrate.Limit{keyrate.PerSecond(1)}},
		{Name: "gold"},
		{Name: keyrate.DefaultPolicy},
	} {
		checkErr(t, fmt.Sprintf("Set(%v)", p), ps.Set(p), invalidPolicy)
	}
	if got, _ := ps.Rules(tier); got != rs {
		t.Errorf("an invalid Set changed pro to %v", got.Policy())
	}
	if got := listed(ps); !slices.Equal(got, before) {
		t.Errorf("List() = %q after invalid Sets, want %q", got, before)
	}
	if _, err := ps.Tier("gold"); err == nil {
		t.Error("an invalid Set added gold")
	}

	// A new name is added, and found by Tier.
	if err := ps.Set(tierFree); err != nil {
		t.Fatal(err)
	}
	if rs := tierRules(t, ps, "free"); !rs.Unlimited() {
		t.Errorf("Tier(free) after Set = %v", rs.Policy())
	}

	// The default is replaced for the zero Tier and Default alike.
	def := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerMinute(7)}}
	if err := ps.Set(def); err != nil {
		t.Fatal(err)
	}
	if rs, _ := ps.Rules(keyrate.Tier{}); rs != ps.Default() || rs.Policy().String() != def.String() {
		t.Errorf("Rules(Tier{}) after Set(default) = %v, Default() = %v; want %v", rs.Policy(), ps.Default().Policy(), def)
	}
	if rs, _ := ps.ForKey("alice"); rs.Policy().String() != def.String() {
		t.Errorf("ForKey after Set(default) = %v, want %v", rs.Policy(), def)
	}
	want := []string{def.String(), tierFree.String(), pro2.String()}
	slices.Sort(want)
	if got := listed(ps); !slices.Equal(got, want) {
		t.Errorf("List() = %q, want %q", got, want)
	}
}

// TestPoliciesForKey: WithPolicyFunc chooses each key's policy by name,
// the empty name being the default, and follows Set.
func TestPoliciesForKey(t *testing.T) {
	plans := map[string]string{"alice": "pro", "bob": "", "carol": "free"}
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicies(tierPro, tierFree),
		keyrate.WithPolicyFunc(func(key string) string { return plans[key] }))
	for key, want := range map[string]string{"alice": "pro", "bob": keyrate.DefaultPolicy, "carol": "free", "dave": keyrate.DefaultPolicy} {
		if rs, err := ps.ForKey(key); err != nil || rs.Name() != want {
			t.Errorf("ForKey(%q) = %v, %v; want %s", key, rs, err, want)
		}
	}
	pro2 := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(1)}}
	if err := ps.Set(pro2); err != nil {
		t.Fatal(err)
	}
	if rs, err := ps.ForKey("alice"); err != nil || rs.Policy().String() != pro2.String() {
		t.Errorf("ForKey(alice) after Set = %v, %v; want %v", rs, err, pro2)
	}
}

// TestPoliciesShareEpoch: every policy is compiled for the store's clock
// and epoch, a policy Set later included, so that a state means the same
// instant under each.
func TestPoliciesShareEpoch(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	ps := newPolicies(t, clk, keyrate.PerSecond(5), keyrate.WithPolicies(tierPro))
	clk.Advance(10 * time.Second)
	seven := keyrate.Policy{Name: "seven", Limits: []keyrate.Limit{keyrate.PerSecond(7)}} // 7 ticks a nanosecond
	if err := ps.Set(seven); err != nil {
		t.Fatal(err)
	}
	for _, rs := range []*rules.Rules{ps.Default(), tierRules(t, ps, "pro"), tierRules(t, ps, "seven")} {
		if got := rs.Now(); got != clk.Now() {
			t.Errorf("%s: Now() = %v, want the store's clock, %v", rs.Name(), got, clk.Now())
		}
		for i := range rs.Len() {
			r := rs.Rule(i)
			if got, want := r.Ticks(clk.Now()), 10*uint64(time.Second)*r.Scale(); got != want {
				t.Errorf("%s window %d: Ticks(now) = %d, want %d (10s after the store's epoch)", rs.Name(), i, got, want)
			}
			if got := r.Reading(0); got != time.Hour {
				t.Errorf("%s window %d: Reading(0) = %v, want the store's epoch, 1h", rs.Name(), i, got)
			}
		}
	}
}

// TestPoliciesConcurrentSet reads policies from several goroutines while
// another replaces and adds them; under -race it checks that Set's
// copy-on-write is safe, and every read finds a whole version.
func TestPoliciesConcurrentSet(t *testing.T) {
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicies(tierPro),
		keyrate.WithPolicyFunc(func(key string) string { return key }))
	tier, err := ps.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	versions := []keyrate.Policy{tierPro, {Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(1)}}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			<-start
			for i := range 2000 {
				rs, err := ps.Rules(tier)
				if err != nil || (rs.Policy().String() != versions[0].String() && rs.Policy().String() != versions[1].String()) {
					errs <- fmt.Errorf("Rules(pro) = %v, %v", rs.Policy(), err)
					return
				}
				if rs, err := ps.ForKey("pro"); err != nil || rs.Name() != "pro" {
					errs <- fmt.Errorf("ForKey(pro) = %v, %v", rs, err)
					return
				}
				name := fmt.Sprint("added", i%50)
				if tier, err := ps.Tier(name); err == nil && tier.Name() != name {
					errs <- fmt.Errorf("Tier(%s).Name() = %q", name, tier.Name())
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for i := range 200 {
			if err := ps.Set(versions[i%2]); err != nil {
				errs <- err
				return
			}
			if err := ps.Set(keyrate.Policy{Name: fmt.Sprint("added", i%50), Limits: []keyrate.Limit{keyrate.PerSecond(1 + i)}}); err != nil {
				errs <- err
				return
			}
		}
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(ps.List()); got != 52 {
		t.Errorf("List() has %d policies, want 52 (default, pro and 50 added)", got)
	}
}

// TestPoliciesAddedFoundAtOnce: a policy Set adds is found by Tier and
// ForKey by every goroutine as soon as Set has returned, through the
// store's passage from scanning a few names to looking them up, and
// through each rebuild of its name map (a thousand names, added one by
// one, as a config of many rules adds them), while other goroutines look
// them up. A name lost between the map of the names added and the
// rebuilt one would be ErrUnknownPolicy here.
func TestPoliciesAddedFoundAtOnce(t *testing.T) {
	const n = 1000
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(5), keyrate.WithPolicyFunc(func(key string) string { return key }))
	var added atomic.Int64 // names n0 .. n(added-1) are in
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; added.Load() < n; i++ {
				k := added.Load()
				if k == 0 {
					continue
				}
				name := fmt.Sprint("n", (int64(i)*7919+int64(g))%k)
				if tier, err := ps.Tier(name); err != nil || tier.Name() != name {
					errs <- fmt.Errorf("Tier(%s) with %d added = %v, %v", name, k, tier.Name(), err)
					return
				}
				if rs, err := ps.ForKey(name); err != nil || rs.Name() != name {
					errs <- fmt.Errorf("ForKey(%s) with %d added = %v, %v", name, k, rs, err)
					return
				}
			}
		})
	}
	for i := range n {
		if err := ps.Set(keyrate.Policy{Name: fmt.Sprint("n", i), Limits: []keyrate.Limit{keyrate.PerSecond(1 + i)}}); err != nil {
			t.Fatal(err)
		}
		added.Store(int64(i + 1))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(ps.List()); got != n+1 {
		t.Errorf("List() has %d policies, want %d (the default and %d added)", got, n+1, n)
	}
}

// BenchmarkPoliciesSetNew adds policies of new names to a store that has
// n already: what a config of many rules (ratelimitsvc) costs a policy.
// Each add should cost the same whatever n is; a copy of the names on
// each add made a config of 32 000 rules take half a minute to load.
func BenchmarkPoliciesSetNew(b *testing.B) {
	for _, n := range []int{10, 1000, 30000} {
		b.Run(fmt.Sprintf("have=%d", n), func(b *testing.B) {
			set, err := config.Configure(nil, keyrate.WithClock(clock.NewManual(0)))
			if err != nil {
				b.Fatal(err)
			}
			ps, err := rules.NewPolicies(keyrate.PerSecond(5), set)
			if err != nil {
				b.Fatal(err)
			}
			p := keyrate.Policy{Limits: []keyrate.Limit{keyrate.PerSecond(10)}}
			for i := range n {
				p.Name = fmt.Sprint("have", i)
				if err := ps.Set(p); err != nil {
					b.Fatal(err)
				}
			}
			names := make([]string, b.N)
			for i := range names {
				names[i] = fmt.Sprint("new", i)
			}
			b.ResetTimer()
			for i := range b.N {
				p.Name = names[i]
				if err := ps.Set(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkForKey finds a key's policy by WithPolicyFunc's name among
// policies=n: by a scan of the names up to 8, by a look-up past them.
func BenchmarkForKey(b *testing.B) {
	for _, n := range []int{4, 64} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			var ps []keyrate.Policy
			names := make([]string, n)
			for i := range n {
				names[i] = fmt.Sprint("tier", i)
				ps = append(ps, keyrate.Policy{Name: names[i], Limits: []keyrate.Limit{keyrate.PerSecond(10)}})
			}
			var next int
			set, err := config.Configure(nil, keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(ps...),
				keyrate.WithPolicyFunc(func(string) string { next = (next + 7) % n; return names[next] }))
			if err != nil {
				b.Fatal(err)
			}
			pols, err := rules.NewPolicies(keyrate.PerSecond(5), set)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := pols.ForKey("k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPoliciesVersion: Version moves with every Set that changes or adds
// a policy, and not with one that is refused (httplimit rebuilds its
// header fields when it moves).
func TestPoliciesVersion(t *testing.T) {
	ps := newPolicies(t, clock.NewManual(0), keyrate.PerSecond(1))
	v0 := ps.Version()
	if err := ps.Set(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(5)}}); err != nil {
		t.Fatal(err)
	}
	if err := ps.Set(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(2)}}); err != nil {
		t.Fatal(err)
	}
	if v := ps.Version(); v != v0+2 {
		t.Fatalf("Version after adding a policy and changing one: %d, want %d", v, v0+2)
	}
	if err := ps.Set(keyrate.Policy{Name: "bad"}); err == nil {
		t.Fatal("Set of a policy without limits: no error")
	}
	if v := ps.Version(); v != v0+2 {
		t.Fatalf("Version after a refused Set: %d, want %d", v, v0+2)
	}
}
