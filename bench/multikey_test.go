package bench

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// BenchmarkAllowAll measures keyrate.AllowAll (issue 28, item 3) beside
// one key, in one run, on every in-process store: op=allowtier is
// AllowTier on one key (the baseline), op=peektier PeekTier on it (the
// check AllowAll makes of every key but the last), op=allowall-1 AllowAll
// of that key alone, op=allowall-2 AllowAll of it and its organisation
// (one of 32),
// each key under its own tier of the workload's open limit. The user keys
// walk uniform-1k's sequence; every call is allowed. Named
// store=<store>/op=<op>/wl=uniform-1k, as the wait rows are.
func BenchmarkAllowAll(b *testing.B) {
	racetest.Bench()
	wl := workloadNamed(b, "uniform-1k")
	var leaves []leaf
	for _, st := range []struct {
		name string
		new  func(keyrate.Limit, ...keyrate.Option) (keyrate.PolicyLimiter, error)
	}{
		{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.PolicyLimiter, error) {
			return mutexbucket.New(l, o...)
		}},
		{"striped", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.PolicyLimiter, error) { return striped.New(l, o...) }},
		{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.PolicyLimiter, error) {
			return atomicbucket.New(l, o...)
		}},
	} {
		for _, op := range []string{"allowtier", "peektier", "allowall-1", "allowall-2"} {
			leaves = append(leaves, leaf{"store=" + st.name + "/op=" + op + "/wl=" + wl.name, func(b *testing.B) {
				benchAllowAll(b, st.new, op, wl)
			}})
		}
	}
	runLeaves(b, leaves)
}

// orgs is the number of organisations allowall-2's users belong to.
const orgs = 32

// benchAllowAll runs one row of BenchmarkAllowAll on a fresh store: every
// user key and organisation inserted, with half its burst spent.
func benchAllowAll(b *testing.B, newStore func(keyrate.Limit, ...keyrate.Option) (keyrate.PolicyLimiter, error), op string, wl workload) {
	in := inputsFor(b, wl)
	pl, err := newStore(wl.limit, keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{wl.limit}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{wl.limit}}))
	if err != nil {
		b.Fatal(err)
	}
	defer pl.(keyrate.BoundedLimiter).Close()
	user, _ := pl.Tier("user")
	org, _ := pl.Tier("org")
	orgKeys := makeKeys("org-", orgs)
	for _, k := range slices.Concat(in.keys, orgKeys) {
		tier := user
		if slices.Contains(orgKeys, k) {
			tier = org
		}
		if d, err := pl.AllowTier(k, tier, wl.limit.Burst/2); err != nil || !d.Allowed {
			b.Fatalf("setup of %s: %+v, %v", k, d, err)
		}
	}
	if got, want := pl.Len(), len(in.keys)+orgs; got != want {
		b.Fatalf("store holds %d keys after setup, want %d", got, want)
	}
	seq := in.seq
	mask := len(seq) - 1
	var goroutines, allowed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)) * offsetStride
		n := int64(0)
		var ks [2]keyrate.KeyCost
		for pb.Next() {
			k := seq[i&mask]
			var ok bool
			switch op {
			case "allowtier":
				d, _ := pl.AllowTier(k, user, 1)
				ok = d.Allowed
			case "peektier":
				d, _ := pl.PeekTier(k, user)
				ok = d.Allowed
			case "allowall-1":
				ks[0] = keyrate.KeyCost{Key: k, Tier: user, Cost: 1}
				d, _ := keyrate.AllowAll(pl, ks[:1])
				ok = d.Allowed
			default:
				ks[0] = keyrate.KeyCost{Key: k, Tier: user, Cost: 1}
				ks[1] = keyrate.KeyCost{Key: orgKeys[i%orgs], Tier: org, Cost: 1}
				d, _ := keyrate.AllowAll(pl, ks[:])
				ok = d.Allowed
			}
			if ok {
				n++
			}
			i++
		}
		allowed.Add(n)
	})
	b.StopTimer()
	if got, want := pl.Len(), len(in.keys)+orgs; got != want {
		b.Fatalf("store holds %d keys after the run, want %d", got, want)
	}
	reportAllowed(b, subjectCase{name: op, limiter: true}, wl, allowed.Load())
}
