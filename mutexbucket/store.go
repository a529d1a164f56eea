// Package mutexbucket is the keyrate store with one mutex per bucket: the
// classic design, and the easiest to reason about.
package mutexbucket

import (
	"sync"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is a keyrate.Limiter that keeps each key's bucket behind its own
// sync.Mutex, in an xsync.MapOf from key to bucket.
//
// A call looks the key up (lock-free for a known key), reads the clock,
// locks that key's bucket, applies keyrate's shared transition and unlocks.
// Calls on different keys never contend; calls on one key serialise on its
// mutex. The map is never locked while a bucket is, and a new key's bucket
// is created by one atomic get-or-create, so two first requests for a key
// share one full bucket.
//
// # Memory
//
// The store removes the buckets of idle keys exactly: only a bucket that is
// full again (idle for at least Limit.FillTime since it was last emptied),
// which is indistinguishable from a new one. The sweep marks such a bucket
// keyrate.Tombstone under the bucket's mutex, in the same critical section
// that finds it full, then deletes it from the map; a call that locks a
// marked bucket looks the key up again, so no spend is ever lost.
//
// A sweep falls due after as many insertions of new keys as the previous
// one left keys (amortised one key examined per insertion) and runs on a
// short-lived goroutine of its own, holding one lock at a time, so that no
// request pays for walking the map; inserters wait for it only if it falls
// a whole period behind. Sweeps also run in the background with
// keyrate.WithSweepInterval, and on demand with Sweep.
//
// keyrate.WithMaxKeys caps the keys tracked: a new key that finds the
// store full examines at most 64 buckets for one it can evict, or that a
// sweep is removing (and starts a whole sweep at most once per cap/16
// such refusals), tries once more for a slot, and otherwise fails closed
// with keyrate.ErrStoreFull. Len and Stats.Keys read one counter, a
// snapshot never above the cap. keyrate.WithHashedKeys keeps a seeded
// 64-bit hash instead of each key. See package internal/sweep for the
// argument that eviction never changes a decision.
//
// A Store is safe for concurrent use. Create one with New, and Close it
// when done with it (Close stops the background sweeper and waits for a
// sweep in flight); the zero value is not usable. Known keys
// cost no allocation; each new key allocates one bucket. Options:
// keyrate.WithClock (default clock.System()), keyrate.WithMaxKeys (default
// no cap), keyrate.WithSweepInterval (default no background sweeper) and
// keyrate.WithHashedKeys (default off).
type Store struct {
	policy  keyrate.Rule
	strs    *xsync.MapOf[string, *bucket] // buckets.Strings(), for the hot path
	buckets sweep.Map[*bucket]
}

// bucket is one key's state and the mutex that guards it. A swept bucket's
// state is keyrate.Tombstone; one not spent from yet, sweep.Fresh.
type bucket struct {
	mu    sync.Mutex
	state keyrate.State
}

// Evict marks b as swept if it is full at now. See sweep.Bucket.
func (b *bucket) Evict(p *keyrate.Rule, now uint64, floor *sweep.Floor) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == keyrate.Tombstone || !p.Full(b.state, now) {
		return false
	}
	floor.Raise(b.state)
	b.state = keyrate.Tombstone
	return true
}

var (
	_ keyrate.Limiter        = (*Store)(nil)
	_ keyrate.BoundedLimiter = (*Store)(nil)
)

// New returns a store enforcing limit on every key. It returns an error
// wrapping keyrate.ErrInvalidLimit or keyrate.ErrInvalidOption if limit or
// an option is out of range.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	s := new(Store)
	if err := s.buckets.Init(&s.policy, limit, opts, newBucket); err != nil {
		return nil, err
	}
	s.strs = s.buckets.Strings()
	return s, nil
}

// newBucket returns a new bucket in state st.
func newBucket(st keyrate.State) *bucket { return &bucket{state: st} }

// spend spends cost tokens from b at tick now if it holds them, and
// returns the state after the call. It reports rare, and does nothing, if
// b is swept or not spent from yet: SpendRare's case.
func (s *Store) spend(b *bucket, now uint64, cost int) (state keyrate.State, ok, rare bool) {
	b.mu.Lock()
	if b.state >= sweep.Fresh {
		b.mu.Unlock()
		return 0, false, true
	}
	next, ok := s.policy.Take(b.state, now, cost)
	b.state = next
	b.mu.Unlock()
	return next, ok, false
}

// SpendRare is spend for a bucket that may be swept (it reports swept and
// does nothing) or not spent from yet (it reads as the floor). See
// sweep.Bucket.
func (b *bucket) SpendRare(p *keyrate.Rule, now uint64, cost int, floor *sweep.Floor) (state keyrate.State, at uint64, ok, swept bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state = b.state
	switch state {
	case keyrate.Tombstone:
		return 0, now, false, true
	case sweep.Fresh:
		state, now = floor.Start(p, now)
	}
	next, ok := p.Take(state, now, cost)
	b.state = next // the floor, if a first spend is denied: so that it can be swept
	return next, now, ok, false
}

// State returns b's state. See sweep.Bucket.
func (b *bucket) State() keyrate.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false also when the
// store is full (keyrate.WithMaxKeys) and key is new.
func (s *Store) Allow(key string) bool {
	if s.strs != nil { // the hot path: a known string key
		if b, ok := s.strs.Load(key); ok {
			if _, ok, rare := s.spend(b, s.policy.Now(), 1); !rare {
				return ok
			}
		}
	}
	return s.buckets.Allow(key)
}

// AllowN spends cost tokens for key if its bucket holds that many, and
// reports the decision. See keyrate.Limiter. For a new key that a full
// store cannot track it returns an error wrapping keyrate.ErrStoreFull.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	if s.strs != nil { // the hot path: a known string key
		if b, ok := s.strs.Load(key); ok {
			now := s.policy.Now()
			if state, ok, rare := s.spend(b, now, cost); !rare {
				return s.policy.Decide(state, now, cost, ok), nil
			}
		}
	}
	return s.buckets.AllowN(key, cost)
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision { return s.buckets.Peek(key) }

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.buckets.Len() }

// Sweep removes the bucket of every key that is full now, and returns how
// many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int { return s.buckets.Sweep() }

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.buckets.Stats() }

// Close stops the background sweeper, if any, and waits for a sweep in
// flight. It is safe to call more than once, and always returns nil. See
// keyrate.BoundedLimiter.
func (s *Store) Close() error { return s.buckets.Close() }
