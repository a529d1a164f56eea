// Package atomicbucket is the lock-free keyrate store: each bucket is one
// 64-bit word updated with compare-and-swap.
package atomicbucket

import (
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/sweep"
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
// find fewer tokens (see keyrate.Rule.Take), so the loop never
// over-admits.
//
// # Memory
//
// The store removes the words of idle keys exactly: only a word that is
// full again (idle for at least Limit.FillTime since it was last emptied),
// which is indistinguishable from a new one. The sweep swaps such a word to
// keyrate.Tombstone with one compare-and-swap from the very value it judged
// full, then deletes it from the map; a spend's compare-and-swap therefore
// either lands before the mark (and the sweep leaves the word alone) or
// finds the mark and looks the key up again, so no spend is ever lost.
//
// A sweep falls due after as many insertions of new keys as the previous
// one left keys (amortised one key examined per insertion) and runs on a
// short-lived goroutine of its own, holding one lock at a time, so that no
// request pays for walking the map; inserters wait for it only if it falls
// a whole period behind. Sweeps also run in the background with
// keyrate.WithSweepInterval, and on demand with Sweep.
//
// keyrate.WithMaxKeys caps the keys tracked: a new key that finds the
// store full examines at most 64 words for one it can evict, or that a
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
// cost no allocation; each new key allocates one word. Options:
// keyrate.WithClock (default clock.System()), keyrate.WithMaxKeys (default
// no cap), keyrate.WithSweepInterval (default no background sweeper) and
// keyrate.WithHashedKeys (default off).
type Store struct {
	policy keyrate.Rule
	strs   *xsync.MapOf[string, *word] // words.Strings(), for the hot path
	words  sweep.Map[*word]
}

// word is one key's packed state; keyrate.Tombstone once swept, and
// sweep.Fresh until first spent from.
type word struct{ v atomic.Uint64 }

// Evict swaps w to keyrate.Tombstone if it is full at now. See
// sweep.Bucket.
func (w *word) Evict(p *keyrate.Rule, now uint64, floor *sweep.Floor) bool {
	for {
		old := w.v.Load()
		if keyrate.State(old) == keyrate.Tombstone || !p.Full(keyrate.State(old), now) {
			return false
		}
		floor.Raise(keyrate.State(old)) // harmless if the swap then fails
		if w.v.CompareAndSwap(old, uint64(keyrate.Tombstone)) {
			return true
		}
	}
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
	if err := s.words.Init(&s.policy, limit, opts, newWord); err != nil {
		return nil, err
	}
	s.strs = s.words.Strings()
	return s, nil
}

// newWord returns a new word in state st.
func newWord(st keyrate.State) *word {
	w := new(word)
	w.v.Store(uint64(st))
	return w
}

// spend runs the CAS loop on w at tick now: it spends cost tokens if the
// bucket holds them and returns the state after the call. It reports rare,
// and does nothing, if w is swept or not spent from yet: SpendRare's case.
func (s *Store) spend(w *word, now uint64, cost int) (state keyrate.State, ok, rare bool) {
	for {
		old := keyrate.State(w.v.Load())
		if old >= sweep.Fresh {
			return 0, false, true
		}
		next, ok := s.policy.Take(old, now, cost)
		if !ok {
			return old, false, false
		}
		if w.v.CompareAndSwap(uint64(old), uint64(next)) {
			return next, true, false
		}
	}
}

// SpendRare is spend for a word that may be swept (it reports swept and
// does nothing) or not spent from yet (it reads as the floor). See
// sweep.Bucket.
func (w *word) SpendRare(p *keyrate.Rule, now uint64, cost int, floor *sweep.Floor) (state keyrate.State, at uint64, ok, swept bool) {
	for {
		old := keyrate.State(w.v.Load())
		state = old
		switch old {
		case keyrate.Tombstone:
			return 0, now, false, true
		case sweep.Fresh:
			state, now = floor.Start(p, now)
		}
		next, ok := p.Take(state, now, cost)
		if !ok {
			if old != sweep.Fresh {
				return old, now, false, false
			}
			next = state // the floor, if a first spend is denied: so that it can be swept
		}
		if w.v.CompareAndSwap(uint64(old), uint64(next)) {
			return next, now, ok, false
		}
	}
}

// State returns w's state. See sweep.Bucket.
func (w *word) State() keyrate.State { return keyrate.State(w.v.Load()) }

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false also when the
// store is full (keyrate.WithMaxKeys) and key is new.
func (s *Store) Allow(key string) bool {
	if s.strs != nil { // the hot path: a known string key
		if w, ok := s.strs.Load(key); ok {
			if _, ok, rare := s.spend(w, s.policy.Now(), 1); !rare {
				return ok
			}
		}
	}
	return s.words.Allow(key)
}

// AllowN spends cost tokens for key if its bucket holds that many, and
// reports the decision. See keyrate.Limiter. For a new key that a full
// store cannot track it returns an error wrapping keyrate.ErrStoreFull.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	if s.strs != nil { // the hot path: a known string key
		if w, ok := s.strs.Load(key); ok {
			now := s.policy.Now()
			if state, ok, rare := s.spend(w, now, cost); !rare {
				return s.policy.Decide(state, now, cost, ok), nil
			}
		}
	}
	return s.words.AllowN(key, cost)
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision { return s.words.Peek(key) }

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.words.Len() }

// Sweep removes the word of every key that is full now, and returns how
// many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int { return s.words.Sweep() }

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.words.Stats() }

// Close stops the background sweeper, if any, and waits for a sweep in
// flight. It is safe to call more than once, and always returns nil. See
// keyrate.BoundedLimiter.
func (s *Store) Close() error { return s.words.Close() }
