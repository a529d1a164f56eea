package bench

import (
	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// subject is what the driver calls: the part of keyrate.Limiter the
// workloads use. Every store satisfies it, and so do the baselines.
type subject interface {
	Allow(key string) bool
	AllowN(key string, cost int) (keyrate.Decision, error)
	Len() int
}

// subjectCase is one row of the table of things benchmarked: its name, the
// value of store= in the benchmark name (which may carry further key=value
// pairs, as in "atomic/clock=coarse"), and how to build one.
type subjectCase struct {
	name string
	// limiter is false for a baseline that does not limit (floor): its
	// allowed/op is reported but not checked.
	limiter bool
	// new builds a fresh instance enforcing l, and a function that releases
	// what it holds (a coarse clock's goroutine).
	new func(l keyrate.Limit) (subject, func(), error)
	// check, if set, is a further setup check, run on the prepared
	// instance with the workload's keys (the policy rows check the
	// policies the keys are decided under).
	check func(s subject, keys []string) error
}

// subjects is every store and baseline, in report order. A store variant is
// one line, its options given to store or coarse. The policy rows
// (policyRows) run on fewer workloads.
var subjects = []subjectCase{
	{name: "mutex", limiter: true, new: store(mutexbucket.New)},
	{name: "striped", limiter: true, new: store(striped.New)},
	{name: "striped/keys=hashed", limiter: true, new: store(striped.New, keyrate.WithHashedKeys())},
	{name: "atomic", limiter: true, new: store(atomicbucket.New)},
	{name: "atomic/clock=coarse", limiter: true, new: coarse(atomicbucket.New)},
	{name: "floor", new: newFloor},
	{name: "xrate", limiter: true, new: newXrate},
}

// store adapts a store's New, with opts, to subjectCase.new.
func store[S subject](newStore func(keyrate.Limit, ...keyrate.Option) (S, error), opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
	return func(l keyrate.Limit) (subject, func(), error) {
		s, err := newStore(l, opts...)
		return s, func() {}, err
	}
}

// coarse is store with the store reading its own clock.Coarse of the
// default resolution, closed by the release function.
func coarse[S subject](newStore func(keyrate.Limit, ...keyrate.Option) (S, error), opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
	return func(l keyrate.Limit) (subject, func(), error) {
		c := clock.NewCoarse(clock.DefaultResolution)
		s, err := newStore(l, append(opts, keyrate.WithClock(c))...)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return s, c.Close, nil
	}
}

// hotRows are the rows of atomicbucket.WithHotKeys, store=atomic/hot=sharded,
// on the one-key workloads only: the key of hotkey and hotkey-deny is hot,
// its tokens spread over per-CPU shards. Compare with store=atomic on the
// same workload (and floor, the single CAS).
var hotRows = []policyRow{
	{subjectCase{
		name:    "atomic/hot=sharded",
		limiter: true,
		new:     store(atomicbucket.New, atomicbucket.WithHotKeys(makeKeys("key-", 1)[0])),
	}, []string{"hotkey", "hotkey-deny"}},
}
