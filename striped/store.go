// Package striped is the keyrate store with N hash-selected lock stripes,
// each a mutex and a plain map from key to packed state.
package striped

import (
	"fmt"
	"hash/maphash"
	"runtime"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is a keyrate.Limiter that splits keys over a power-of-two number of
// stripes by a seeded hash of the key. Each stripe is a sync.Mutex and a
// plain Go map from key to packed state (keyrate.State), padded to a cache
// line so that stripes never share one.
//
// A call hashes the key, reads the clock, locks the key's stripe, applies
// keyrate's shared transition to the key's state and unlocks. Keys on
// different stripes never contend. The maps hold no pointer per bucket
// (just the key), which keeps memory per key and GC work low; with
// keyrate.WithHashedKeys the map key is the 64-bit hash itself and the maps
// hold no pointers at all, so the garbage collector never scans them.
//
// The hash is hash/maphash with a seed drawn at random per Store, so keys
// crafted to land on one stripe in one process do not in another. It
// measured faster than a seeded xxhash on the development machine (9.5-10.6
// ns against 15-25 ns for 8- to 64-byte keys; see BenchmarkHash): xxhash
// has no one-shot seeded form, and maphash uses the runtime's AES hash.
//
// # Memory
//
// The store removes idle keys exactly: only a key whose bucket is full
// again (idle for at least Limit.FillTime since it was last emptied), which
// is indistinguishable from a new one. The check and the delete happen
// under the stripe lock that every spend takes, so no spend can fall
// between them. Every insertion of a new key first examines 16 keys of its
// stripe, a random sample (Go starts each range over a map at a random
// entry), under the lock it already holds, and evicts those that are full:
// bounded work per insertion that keeps a store without a cap within about
// 16/15 of its keys that are not full. A stripe whose map falls to a
// quarter of its peak is rebuilt, since Go maps never shrink. The whole
// store is swept stripe by stripe, one lock at a time, on demand with
// Sweep and in the background with keyrate.WithSweepInterval (which turns
// off the sampling on insertion, except in a full store).
//
// keyrate.WithMaxKeys caps the keys tracked. A new key that finds the
// store full, and no full key in its stripe's sample, makes the caller
// sweep the whole store, at most once per cap/16 such refusals
// (sweep.RefusalWeight; amortised 16 keys examined per refusal), and
// otherwise examine at most 64 keys of the stripes that follow its own,
// one stripe lock at a time and no more than 1024 stripes, evicting the
// full ones; it then tries once more, and fails closed with
// keyrate.ErrStoreFull if the store is still full. Len and Stats.Keys read
// one counter, a snapshot never above the cap. See
// package internal/sweep for the argument that eviction never changes a
// decision.
//
// A Store is safe for concurrent use. Create one with New, and Close it if
// it has a background sweeper; the zero value is not usable. Known keys
// cost no allocation; new keys grow a map. Options: keyrate.WithClock
// (default clock.System()), WithStripes (default DefaultStripes()),
// keyrate.WithMaxKeys (default no cap), keyrate.WithSweepInterval (default
// no background sweeper) and keyrate.WithHashedKeys (default off).
type Store struct {
	policy keyrate.Rule
	seed   maphash.Seed
	mask   uint64
	strs   *table[string] // the stripes, keyed by key unless hashed
	hashes *table[uint64] // the stripes, keyed by the key's hash if hashed
	book   sweep.Book
	pacer  sweep.Pacer // paces whole sweeps on refusals by a full store
	bg     *sweep.Background
}

var (
	_ keyrate.Limiter        = (*Store)(nil)
	_ keyrate.BoundedLimiter = (*Store)(nil)
)

// settings is the striped store's own configuration.
type settings struct{ stripes int }

// MaxStripes is the most stripes WithStripes accepts.
const MaxStripes = 1 << 20

// DefaultStripes returns the default stripe count: 16 stripes per
// GOMAXPROCS, rounded up to a power of two, so that two goroutines running
// at once rarely want the same stripe.
func DefaultStripes() int { return layout.NextPow2(16 * runtime.GOMAXPROCS(0)) }

// WithStripes sets the number of stripes, a power of two from 1 to
// MaxStripes. The default is DefaultStripes().
func WithStripes(n int) keyrate.Option {
	return keyrate.StoreOption("striped.WithStripes", func(s *settings) error {
		if n < 1 || n > MaxStripes || n&(n-1) != 0 {
			return fmt.Errorf("stripe count %d is not a power of two from 1 to %d", n, MaxStripes)
		}
		s.stripes = n
		return nil
	})
}

// New returns a store enforcing limit on every key. It returns an error
// wrapping keyrate.ErrInvalidLimit or keyrate.ErrInvalidOption if limit or
// an option is out of range.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	own := settings{stripes: DefaultStripes()}
	set, err := keyrate.Configure(&own, opts...)
	if err != nil {
		return nil, err
	}
	policy, err := keyrate.NewRule(limit, set.Clock)
	if err != nil {
		return nil, err
	}
	s := &Store{
		policy: policy,
		seed:   maphash.MakeSeed(),
		mask:   uint64(own.stripes - 1),
	}
	if set.HashedKeys {
		s.hashes = newTable[uint64](own.stripes)
	} else {
		s.strs = newTable[string](own.stripes)
	}
	s.book.Init(set.MaxKeys)
	s.pacer.Init(min(sweep.MinPace, max(set.MaxKeys, 1)))
	s.bg = sweep.Start(set.SweepInterval, func() { s.Sweep() })
	return s, nil
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false also when the
// store is full (keyrate.WithMaxKeys) and key is new.
func (s *Store) Allow(key string) bool {
	h := maphash.String(s.seed, key)
	now := s.policy.Now()
	var ok, full bool
	if s.hashes != nil {
		_, _, ok, full = s.hashes.take(s, h, h, now, 1)
	} else {
		_, _, ok, full = s.strs.take(s, key, h, now, 1)
	}
	if full {
		_, _, ok, _ = s.full(key, h, now, 1)
	}
	return ok
}

// AllowN spends cost tokens for key if its bucket holds that many, and
// reports the decision. See keyrate.Limiter. For a new key that a full
// store cannot track it returns an error wrapping keyrate.ErrStoreFull.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	h := maphash.String(s.seed, key)
	now := s.policy.Now()
	var (
		state    keyrate.State
		ok, full bool
		err      error
	)
	if s.hashes != nil {
		state, now, ok, full = s.hashes.take(s, h, h, now, cost)
	} else {
		state, now, ok, full = s.strs.take(s, key, h, now, cost)
	}
	if full {
		state, now, ok, err = s.full(key, h, now, cost)
		if err != nil {
			return keyrate.Decision{}, err
		}
	}
	return s.policy.Decide(state, now, cost, ok), nil
}

// full is what a request for a new key does when the store is full and
// its stripe's sample freed nothing: a whole sweep, if one is due
// (sweep.Pacer), else a bounded scan of the other stripes (evictOne); then
// one more try, and refusal if that finds the store full again.
func (s *Store) full(key string, h, now uint64, cost int) (keyrate.State, uint64, bool, error) {
	if s.pacer.Charge(sweep.RefusalWeight) {
		s.Sweep()
		s.pacer.Swept()
	} else if s.hashes != nil {
		s.hashes.evictOne(s, h)
	} else {
		s.strs.evictOne(s, h)
	}
	var (
		state    keyrate.State
		ok, full bool
	)
	if s.hashes != nil {
		state, now, ok, full = s.hashes.take(s, h, h, now, cost)
	} else {
		state, now, ok, full = s.strs.take(s, key, h, now, cost)
	}
	if full {
		return 0, now, false, s.book.Refuse()
	}
	return state, now, ok, nil
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision {
	h := maphash.String(s.seed, key)
	var state keyrate.State
	if s.hashes != nil {
		state = s.hashes.peek(h, h)
	} else {
		state = s.strs.peek(key, h)
	}
	return s.policy.Peek(state, s.policy.Now())
}

// Len returns the number of keys the store tracks: a snapshot of one
// instant, never above keyrate.WithMaxKeys's cap, kept in one counter
// rather than summed over the stripes (which would lock one stripe at a
// time, and could count a key evicted from one stripe and the key inserted
// in its place in another).
func (s *Store) Len() int { return s.book.Keys() }

// Sweep removes every key whose bucket is full now, stripe by stripe, and
// returns how many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int {
	var n, left int
	if s.hashes != nil {
		n, left = s.hashes.sweep(s)
	} else {
		n, left = s.strs.sweep(s)
	}
	s.pacer.Reset(left)
	return n
}

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.book.Stats() }

// Close stops the background sweeper, if any. It is safe to call more than
// once, and always returns nil. See keyrate.BoundedLimiter.
func (s *Store) Close() error {
	s.bg.Stop()
	return nil
}
