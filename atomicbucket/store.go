// Package atomicbucket is the lock-free keyrate store: each bucket is one
// 64-bit word updated with compare-and-swap.
package atomicbucket

import (
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
)

// Store is a keyrate.Limiter that keeps each key's packed state (see
// keyrate.State) in an atomic.Uint64, in an xsync.MapOf from key to word.
//
// A call looks the key up (lock-free for a known key), reads the clock and
// runs a compare-and-swap loop: load the word, apply keyrate's shared
// transition, and swap the result in if no other goroutine changed the word
// meanwhile, else retry with the fresh word. A denied request writes
// nothing, so a hot key that is being denied is read-shared by every core.
// The reading of now is not retaken on a retry: a stale reading can only
// find fewer tokens (see keyrate.Policy.Take), so the loop never
// over-admits.
//
// A Store is safe for concurrent use. Create one with New; the zero value
// is not usable. Known keys cost no allocation; each new key allocates one
// word. Options: keyrate.WithClock (default clock.System()).
type Store struct {
	policy keyrate.Policy
	words  *xsync.MapOf[string, *atomic.Uint64]
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
	return &Store{policy: policy, words: xsync.NewMapOf[string, *atomic.Uint64]()}, nil
}

// get returns key's word, creating a full bucket on first use.
func (s *Store) get(key string) *atomic.Uint64 {
	if w, ok := s.words.Load(key); ok {
		return w
	}
	w, _ := s.words.LoadOrCompute(key, func() *atomic.Uint64 { return new(atomic.Uint64) })
	return w
}

// take runs the CAS loop: it spends cost tokens from w at tick now if the
// bucket holds them, and returns the state after the call.
func (s *Store) take(w *atomic.Uint64, now uint64, cost int) (keyrate.State, bool) {
	for {
		old := keyrate.State(w.Load())
		next, ok := s.policy.Take(old, now, cost)
		if !ok {
			return old, false
		}
		if w.CompareAndSwap(uint64(old), uint64(next)) {
			return next, true
		}
	}
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed.
func (s *Store) Allow(key string) bool {
	_, ok := s.take(s.get(key), s.policy.Now(), 1)
	return ok
}

// AllowN spends cost tokens for key if its bucket holds that many, and
// reports the decision. See keyrate.Limiter.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	w := s.get(key)
	now := s.policy.Now()
	state, ok := s.take(w, now, cost)
	return s.policy.Decide(state, now, cost, ok), nil
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision {
	var state keyrate.State // an unknown key is a full bucket
	now := s.policy.Now()
	if w, ok := s.words.Load(key); ok {
		state = keyrate.State(w.Load())
	}
	return s.policy.Peek(state, now)
}

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.words.Size() }
