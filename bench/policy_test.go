package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// The policy rows measure what a policy costs beside the one-window rows
// of the same store, in the same run: store=<store>/policy=2windows (every
// key under one policy of two windows) on hotkey and uniform-1k, and
// store=<store>/policy=3tiers (three one-window policies, each key's chosen
// by WithPolicyFunc) on uniform-1k. Their limits are as open as the
// workload's, so that every call is allowed, as on the one-window rows.
var (
	// perHour is the second window of 2windows: 3.6 trillion an hour (one
	// a nanosecond) with a burst of two trillion, which setup's spend of
	// half of open's burst leaves far from empty, and not full.
	perHour = keyrate.Limit{Rate: 3_600_000_000_000, Per: time.Hour, Burst: 2_000_000_000_000}

	// twoWindows replaces the default policy, so that Allow decides every
	// key under it with no WithPolicyFunc: window 0 is the one-window
	// rows' limit, and the row differs from them by the second window
	// alone.
	twoWindows = keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{open, perHour}}

	// tiers are 3tiers' policies, one window each, as open as open: every
	// burst at least open's, so that setup's spend leaves none full.
	tiers = []keyrate.Policy{
		{Name: "free", Limits: []keyrate.Limit{open}},
		{Name: "pro", Limits: []keyrate.Limit{open.WithBurst(2 * open.Burst)}},
		{Name: "team", Limits: []keyrate.Limit{{Rate: 2 * open.Rate, Per: open.Per, Burst: 4 * open.Burst}}},
	}

	// tierNames is the name of tiers[i], indexed by tierOf.
	tierNames = [3]string{"free", "pro", "team"}
)

// tierOf is 3tiers' WithPolicyFunc, a rule as cheap as a user's should
// be: a key's last byte mod 3 picks its tier. The benchmark keys end in a
// decimal digit, so the 1k keys split 4:3:3 (digits 0, 3, 6, 9; 1, 4, 7;
// 2, 5, 8).
func tierOf(key string) string {
	if key == "" {
		return ""
	}
	return tierNames[key[len(key)-1]%3]
}

// policyRow is one policy row: its subject (named <store>/policy=<p>)
// and the workloads it runs on.
type policyRow struct {
	subjectCase
	workloads []string
}

// policyRows is every policy row, in report order.
var policyRows = slices.Concat(
	policyRowsOf("mutex", mutexbucket.New),
	policyRowsOf("striped", striped.New),
	policyRowsOf("atomic", atomicbucket.New),
	hotRows,
)

// policyRowsOf returns the policy rows of the store named name: 2windows
// on hotkey and uniform-1k, 3tiers on uniform-1k.
func policyRowsOf[S subject](name string, newStore func(keyrate.Limit, ...keyrate.Option) (S, error)) []policyRow {
	return []policyRow{
		{subjectCase{
			name:    name + "/policy=2windows",
			limiter: true,
			new:     store(newStore, keyrate.WithPolicies(twoWindows)),
			check:   checkPolicies(map[string]int{keyrate.DefaultPolicy: 2}),
		}, []string{"hotkey", "uniform-1k"}},
		{subjectCase{
			name:    name + "/policy=3tiers",
			limiter: true,
			new:     store(newStore, keyrate.WithPolicies(tiers...), keyrate.WithPolicyFunc(tierOf)),
			check:   checkPolicies(map[string]int{"free": 1, "pro": 1, "team": 1}),
		}, []string{"uniform-1k"}},
	}
}

// checkPolicies returns a setup check that the keys are decided under the
// policies of want (name to number of windows), each with as many windows
// as want says, and that each policy decides at least a quarter of its
// share of the keys: a policy function that sent every key to one tier
// would measure one tier. It spends one token of each key.
func checkPolicies(want map[string]int) func(subject, []string) error {
	return func(s subject, keys []string) error {
		pl, ok := s.(keyrate.PolicyLimiter)
		if !ok {
			return fmt.Errorf("%T is not a keyrate.PolicyLimiter", s)
		}
		windows := map[string]int{}
		for _, p := range pl.Policies() {
			windows[p.Name] = len(p.Limits)
		}
		count := map[string]int{}
		for _, k := range keys {
			d, err := s.AllowN(k, 1)
			if err != nil {
				return err
			}
			if _, ok := want[d.Policy]; !ok {
				return fmt.Errorf("key %q decided under policy %q, want one of %v", k, d.Policy, want)
			}
			count[d.Policy]++
		}
		for name, n := range want {
			if windows[name] != n {
				return fmt.Errorf("policy %q has %d windows, want %d", name, windows[name], n)
			}
			if count[name]*4*len(want) < len(keys) {
				return fmt.Errorf("policy %q decided %d of %d keys, below a quarter of its share", name, count[name], len(keys))
			}
		}
		return nil
	}
}
