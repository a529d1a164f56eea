package keyrate

import (
	"fmt"
	"time"

	"github.com/keyrate/keyrate/internal/settings"
)

// Stats is a snapshot of a store's bookkeeping, from its Stats method.
type Stats struct {
	// Keys is the number of keys the store tracks now, as Len reports: the
	// count at one instant during the call, never above WithMaxKeys's cap.
	// A key counts from the moment its insertion reserves a slot.
	Keys int
	// Evictions is the number of buckets the store has removed since it
	// was created, because they were full: as many tokens as a new bucket,
	// so that removing them changed no decision.
	Evictions uint64
	// Refused is the number of requests for a new key that the store
	// refused because it already tracked WithMaxKeys keys, none of which
	// could be evicted (AllowN returned ErrStoreFull, Allow false).
	Refused uint64
}

// BoundedLimiter is a Limiter that bounds its own memory: it removes the
// buckets of idle keys, exactly (only buckets that are full again, which a
// new key would get anyway), and can cap the number of keys it tracks. The
// in-process stores (mutexbucket, striped, atomicbucket) implement it.
type BoundedLimiter interface {
	Limiter

	// Sweep examines every tracked key once and removes the buckets that
	// are full at the current time, returning how many it removed. It
	// holds at most one bucket or stripe lock at a time and never stops
	// other calls; it is safe to call concurrently with anything.
	Sweep() int

	// Stats returns a snapshot of the store's bookkeeping.
	Stats() Stats

	// Close stops the background sweeper started by WithSweepInterval, if
	// any, and every other goroutine the store started (a sweep in
	// flight), and waits for them to return. It is safe to call more than
	// once and on a store without a sweeper, and always returns nil. The
	// store keeps working after Close, maintaining itself on the calling
	// goroutines only.
	Close() error
}

// WithMaxKeys caps the number of keys the store tracks at n, which must be
// at least 1. The default is no cap.
//
// The cap holds at every instant, also under concurrency: a slot is
// reserved before a new key is inserted, and Len and Stats.Keys, which read
// the count of slots held, never report more than n. When the store is full, a request
// for a new key first has the store evict the buckets that are full again
// (with a bounded amount of work per call; see the store's documentation).
// If none can go, the request fails closed: AllowN returns an error
// wrapping ErrStoreFull (naming the cap), Allow returns false, nothing is
// spent or stored, and Stats counts it in Refused. Keys already tracked are
// served normally. A bucket that is not full is never evicted to make
// room: that would hand its client a fresh bucket and relax the limit.
func WithMaxKeys(n int) Option {
	return func(s *settings.Settings[Policy]) {
		if s.Err != nil {
			return
		}
		if n < 1 {
			s.Err = fmt.Errorf("%w: WithMaxKeys: %d is below 1", ErrInvalidOption, n)
			return
		}
		s.MaxKeys = n
	}
}

// WithSweepInterval starts a background goroutine that sweeps the store
// (see BoundedLimiter.Sweep) every d, which must be positive; Close stops
// it. The default is no background goroutine: a store then maintains
// itself incrementally, driven by the calls that insert new keys (each
// store documents how), and a program can call Sweep whenever it likes.
// With a background sweeper that incremental maintenance is off, except
// in a store that WithMaxKeys has filled.
func WithSweepInterval(d time.Duration) Option {
	return func(s *settings.Settings[Policy]) {
		if s.Err != nil {
			return
		}
		if d <= 0 {
			s.Err = fmt.Errorf("%w: WithSweepInterval: %v is not positive", ErrInvalidOption, d)
			return
		}
		s.SweepInterval = d
	}
}

// DefaultEvictionGrace is the eviction grace period of a store built
// without WithEvictionGrace: a minute. A client that calls at least once
// a minute, however far under its limit, keeps its bucket, so the common
// gateway case of clients well under their limits costs no eviction and
// no re-insertion per call (with a grace of 0, a bucket full again a
// millisecond after each call is evicted by the next sweep and inserted
// again by the next call: an allocation or two per call). What it costs is
// memory: a store holds the buckets of clients gone for up to a minute
// longer, at most one minute's worth of new keys beyond those a grace of
// 0 would hold. A store full under WithMaxKeys evicts without it.
const DefaultEvictionGrace = time.Minute

// WithEvictionGrace sets how long a bucket must have been full before the
// store's routine maintenance (its paced and background sweeps, and the
// sampling on insert of striped and atomicbucket) evicts it; d must not be
// negative.
// The default is DefaultEvictionGrace; 0 evicts a bucket as soon as it is
// full. Eviction stays exact whatever d is: only full buckets go, and a
// full bucket decides as a new key does. A store full under WithMaxKeys
// evicts any full bucket, as does an explicit Sweep. A bucket's full time
// is what its state records: a window algorithm's bucket refunded to
// empty counts as full since its window began, and its grace may end up
// to a window sooner.
func WithEvictionGrace(d time.Duration) Option {
	return func(s *settings.Settings[Policy]) {
		if s.Err != nil {
			return
		}
		if d < 0 {
			s.Err = fmt.Errorf("%w: WithEvictionGrace: %v is negative", ErrInvalidOption, d)
			return
		}
		s.EvictionGrace = d
	}
}

// WithHashedKeys makes the store keep a 64-bit hash of each key, seeded at
// random per store, instead of the key string. It saves memory for stores
// with millions of keys (the key's bytes are not retained, and the striped
// store's maps then hold no pointers for the garbage collector to scan).
// The default is to keep the keys.
//
// Two distinct keys share a bucket when their hashes collide: among n
// keys, some pair collides with probability about n²/2^65 (one in 3.7·10^5
// for 10 million keys). A collision merges two clients' buckets, so those
// two clients get one limit between them: it can only deny them more,
// never admit anyone more. The per-store random seed keeps an attacker
// from crafting colliding keys.
func WithHashedKeys() Option {
	return func(s *settings.Settings[Policy]) {
		if s.Err == nil {
			s.HashedKeys = true
		}
	}
}
