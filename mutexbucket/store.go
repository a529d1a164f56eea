// Package mutexbucket is the keyrate store with one mutex per bucket: the
// classic design, and the easiest to reason about.
package mutexbucket

import (
	"sync"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
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
// A Store is safe for concurrent use. Create one with New; the zero value
// is not usable. Known keys cost no allocation; each new key allocates one
// bucket. Options: keyrate.WithClock (default clock.System()).
type Store struct {
	policy  keyrate.Policy
	buckets *xsync.MapOf[string, *bucket]
}

// bucket is one key's state and the mutex that guards it.
type bucket struct {
	mu    sync.Mutex
	state keyrate.State
}

var _ keyrate.Limiter = (*Store)(nil)

// New returns a store enforcing limit on every key. It returns an error
// wrapping keyrate.ErrInvalidLimit or keyrate.ErrInvalidOption if limit or
// an option is out of range.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	set, err := keyrate.Configure(nil, opts...)
	if err != nil {
		return nil, err
	}
	policy, err := keyrate.NewPolicy(limit, set.Clock)
	if err != nil {
		return nil, err
	}
	return &Store{policy: policy, buckets: xsync.NewMapOf[string, *bucket]()}, nil
}

// get returns key's bucket, creating a full one on first use.
func (s *Store) get(key string) *bucket {
	if b, ok := s.buckets.Load(key); ok {
		return b
	}
	b, _ := s.buckets.LoadOrCompute(key, func() *bucket { return new(bucket) })
	return b
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed.
func (s *Store) Allow(key string) bool {
	b := s.get(key)
	now := s.policy.Now()
	b.mu.Lock()
	next, ok := s.policy.Take(b.state, now, 1)
	b.state = next
	b.mu.Unlock()
	return ok
}

// AllowN spends cost tokens for key if its bucket holds that many, and
// reports the decision. See keyrate.Limiter.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	b := s.get(key)
	now := s.policy.Now()
	b.mu.Lock()
	next, ok := s.policy.Take(b.state, now, cost)
	b.state = next
	b.mu.Unlock()
	return s.policy.Decide(next, now, cost, ok), nil
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision {
	var state keyrate.State // an unknown key is a full bucket
	now := s.policy.Now()
	if b, ok := s.buckets.Load(key); ok {
		b.mu.Lock()
		state = b.state
		b.mu.Unlock()
	}
	return s.policy.Peek(state, now)
}

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.buckets.Size() }
