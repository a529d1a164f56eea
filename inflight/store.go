package inflight

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
)

// MaxLimit is the largest limit New accepts: 2^30 slots per key.
const MaxLimit = 1 << 30

// MaxKeyLen is the longest key, in bytes, a Store accepts, as redisbucket
// accepts: a key is a client's name, not a payload.
const MaxKeyLen = 512

// dead marks a key's count that a sweep retired: the key is being deleted
// from the map, and an acquire that meets it looks the key up again.
const dead = math.MinInt64

// minSweep is the fewest keys at which a Store sweeps idle keys.
const minSweep = 1024

// Limiter is a per-key concurrency limit: at most some number of slots
// held per key. Store (in process) and redisbucket's InflightStore (across
// a fleet) implement it; httplimit and grpclimit take one.
type Limiter interface {
	// TryAcquireContext takes a slot of key if fewer than the limit are
	// held, without waiting: a Slot whose Acquired is false means the key
	// is at its limit. ctx bounds a remote store's call. An error (an
	// invalid key, a store's failure) comes with the zero Slot.
	TryAcquireContext(ctx context.Context, key string) (Slot, error)
	// Limit is the most slots a key may hold at once.
	Limit() int
}

// Store is an in-process concurrency limit: at most Limit() slots held
// per key at once, whatever the concurrency. A known key's TryAcquire and
// Release take no lock and allocate nothing. Create one with New; a Store
// is safe for concurrent use and needs no Close.
type Store struct {
	n     int64 // the limit
	open  int64 // the slots an acquire that is not critical may fill
	keys  *xsync.MapOf[string, *keyState]
	pool  sync.Pool // of *holder
	sweep struct {
		mu   sync.Mutex
		next atomic.Int64 // the map size at which a new key sweeps
	}
	// hookLoaded, when set by a test, runs after an acquire has loaded a
	// key's state and before it counts into it.
	hookLoaded func(key string)
	// hookWait, when set by a test, runs when Acquire is about to sleep.
	hookWait func(key string)
	// hookRefused, when set by a test, runs when Acquire has been refused
	// and has not yet registered as a waiter.
	hookRefused func(key string)
	// hookSweep, when set by a test, runs when Sweep has found a key
	// without waiters, before it retires the key.
	hookSweep func(key string)
}

// keyState is one key's count of slots held, and its waiters.
type keyState struct {
	n       atomic.Int64 // slots held, or dead
	waiters atomic.Int64 // Acquire calls asleep or about to sleep on wake
	// free caches one holder for the key's next acquire, the last one
	// released there: a swap instead of the pool's Get and Put on a key
	// that is acquired again and again.
	free atomic.Pointer[holder]
	mu   sync.Mutex // guards wake
	wake chan struct{}
}

var _ Limiter = (*Store)(nil)

// New returns a Store that lets each key hold at most n slots at once. It
// returns an error wrapping keyrate.ErrInvalidLimit if n is not in [1,
// MaxLimit], and an option's error if one is invalid.
func New(n int, opts ...Option) (*Store, error) {
	if n < 1 || n > MaxLimit {
		return nil, fmt.Errorf("%w: inflight.New(%d): the limit is not in [1, %d]", keyrate.ErrInvalidLimit, n, MaxLimit)
	}
	s := &Store{n: int64(n), open: int64(n), keys: xsync.NewMapOf[string, *keyState]()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(s); err != nil {
			return nil, err
		}
	}
	s.pool.New = func() any { return &holder{store: s} }
	s.sweep.next.Store(minSweep)
	return s, nil
}

// Limit returns the most slots a key may hold at once.
func (s *Store) Limit() int { return int(s.n) }

// Len returns the number of keys the store tracks: those holding a slot,
// and idle ones not yet swept.
func (s *Store) Len() int { return s.keys.Size() }

// checkKey returns an error for a key the store does not take.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: inflight: the key is empty", keyrate.ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: inflight: the key is %d bytes, over %d", keyrate.ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// TryAcquire takes a slot of key if fewer than Limit() are held (fewer
// than Limit() minus WithReserved's, since it is not critical), without
// waiting. A Slot whose Acquired is false means the key is at its limit.
// An empty key, or one over MaxKeyLen bytes, gets an error wrapping
// keyrate.ErrInvalidKey.
func (s *Store) TryAcquire(key string) (Slot, error) {
	return s.tryAcquire(key, s.open)
}

// tryAcquire is TryAcquire filling at most limit slots.
func (s *Store) tryAcquire(key string, limit int64) (Slot, error) {
	if err := checkKey(key); err != nil {
		return Slot{}, err
	}
	st, ok := s.acquire(key, limit)
	if !ok {
		return Slot{}, nil
	}
	h := st.free.Swap(nil)
	if h == nil {
		h = s.pool.Get().(*holder)
	}
	h.state = st
	return Slot{r: h, gen: h.gen.Load()}, nil
}

// TryAcquireContext is TryAcquire, or TryAcquireCritical if ctx is marked
// by Critical; it does not wait. It implements Limiter.
func (s *Store) TryAcquireContext(ctx context.Context, key string) (Slot, error) {
	return s.tryAcquire(key, s.limitFor(ctx))
}

// acquire counts a slot into key's state if it holds fewer than limit, and
// returns the state; it returns the state that refused, and false, if the
// key is at limit.
func (s *Store) acquire(key string, limit int64) (*keyState, bool) {
	for {
		st, ok := s.keys.Load(key)
		if !ok {
			st = s.insert(key)
		}
		if s.hookLoaded != nil {
			s.hookLoaded(key)
		}
		for {
			c := st.n.Load()
			if c == dead {
				s.unlink(key, st)
				break // look the key up again
			}
			if c >= limit {
				return st, false
			}
			if st.n.CompareAndSwap(c, c+1) {
				return st, true
			}
		}
	}
}

// insert returns key's state, adding a new one if the key has none, and
// sweeps idle keys once the map holds twice the keys the last sweep kept
// (and at least minSweep).
func (s *Store) insert(key string) *keyState {
	st, loaded := s.keys.LoadOrCompute(key, func() *keyState { return new(keyState) })
	if !loaded && int64(s.keys.Size()) >= s.sweep.next.Load() {
		s.Sweep()
	}
	return st
}

// unlink deletes key from the map if its state is still st.
func (s *Store) unlink(key string, st *keyState) {
	s.keys.Compute(key, func(old *keyState, loaded bool) (*keyState, bool) {
		return old, !loaded || old == st // delete, or store nothing for an absent key
	})
}

// Sweep deletes the keys that hold no slot and have no waiter, to free
// their memory. It never changes a decision: a swept key's next acquire
// starts from no slots held, as the key had. Stores sweep by themselves
// as they grow (see the package documentation); call Sweep to shrink one
// sooner, after a burst of clients has gone. Concurrent Sweeps are
// merged: a call while another runs returns at once.
func (s *Store) Sweep() {
	if !s.sweep.mu.TryLock() {
		return
	}
	defer s.sweep.mu.Unlock()
	live := int64(0)
	s.keys.Range(func(key string, st *keyState) bool {
		if st.waiters.Load() == 0 {
			if s.hookSweep != nil {
				s.hookSweep(key)
			}
			if st.n.CompareAndSwap(0, dead) {
				s.unlink(key, st)
				return true
			}
		}
		live++
		return true
	})
	s.sweep.next.Store(max(2*live, minSweep))
}

// release gives back one slot of st, and wakes its waiters if any.
func (st *keyState) release() {
	st.n.Add(-1)
	if st.waiters.Load() != 0 {
		st.mu.Lock()
		if st.wake != nil {
			close(st.wake)
			st.wake = nil
		}
		st.mu.Unlock()
	}
}
