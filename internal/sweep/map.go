package sweep

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
)

// Bucket is what a pointer store keeps per key: a pointer to one bucket's
// state and whatever synchronises it.
type Bucket interface {
	comparable
	// Evict marks the bucket keyrate.Tombstone if it is full at tick now,
	// in one step that no spend can interleave with (under the bucket's
	// lock, or by a compare-and-swap from the state judged full), and
	// reports whether it did; before marking it raises floor to the state
	// it judged full. A bucket already marked reports false.
	Evict(p *keyrate.Rule, now uint64, floor *Floor) bool
	// SpendRare spends cost tokens from the bucket at tick now if it holds
	// them, in one step (under its lock, or by a compare-and-swap loop),
	// and returns its state after the call and the tick it was decided
	// at. A bucket not spent from yet (Fresh) is read as the floor, at the
	// tick Floor.Start gives (now, or a fresh reading if the floor lies
	// ahead of now), and left in that state if the spend is denied, so
	// that a sweep can remove it. A bucket marked keyrate.Tombstone is
	// left alone and reported swept.
	SpendRare(p *keyrate.Rule, now uint64, cost int, floor *Floor) (state keyrate.State, at uint64, ok, swept bool)
	// State returns the bucket's state, which may be Fresh or
	// keyrate.Tombstone.
	State() keyrate.State
}

// Map is the key-to-bucket map of a store that keeps one pointer per key
// (mutexbucket, atomicbucket): an xsync.MapOf keyed by the key string or,
// with keyrate.WithHashedKeys, by a 64-bit hash of it seeded per store,
// together with the store's Book, Pacer, floor and Background sweeper.
//
// Lookups of known keys are lock-free. A new key reserves a slot in the
// Book before it is inserted. Removal is two steps, in this order: the
// bucket is marked keyrate.Tombstone (Bucket.Evict), then deleted from the
// map only if the map still holds that very bucket (Drop). A spender that
// finds its bucket marked calls Drop itself and looks the key up again
// (see the package documentation for why this never changes a decision).
//
// A paced sweep falls due after as many insertions as the previous sweep
// left keys (at least MinPace, or the cap), which is amortised one key
// examined per insertion, and after cap/RefusalWeight refusals; it runs on
// a short-lived goroutine of its own, which Close waits for, so that no
// request pays for a whole sweep. With a background sweeper, insertions do
// not pace sweeps.
//
// Map is all of such a store but the synchronisation of one bucket, which
// B supplies: besides the map and its eviction, it holds the slow path of
// the store's requests (Take, Allow, AllowN), Peek, Len, Sweep, Stats and
// Close. The store keeps only its known-key fast path, which calls its own
// bucket type directly. Set a Map up with Init; it is safe for concurrent
// use.
type Map[B Bucket] struct {
	policy *keyrate.Rule
	fresh  func(keyrate.State) B
	seed   maphash.Seed
	strs   *xsync.MapOf[string, B] // the keys, unless hashed
	hashes *xsync.MapOf[uint64, B] // the keys' hashes, if hashed
	floor  Floor                   // the latest state of an evicted bucket
	book   Book
	pacer  Pacer
	bg     *Background

	mu       sync.Mutex     // guards closed, inflight and running.Add
	closed   bool           // Close was called: paced sweeps run on the caller
	inflight chan struct{}  // closed when the latest paced sweep is done
	running  sync.WaitGroup // paced sweeps in flight
}

// init sets m up for a store enforcing policy under settings set, with
// fresh building a new bucket in the given state (always Fresh). It starts the
// background sweeper if set asks for one.
func (m *Map[B]) init(policy *keyrate.Rule, set keyrate.Settings, fresh func(keyrate.State) B) {
	m.policy, m.fresh = policy, fresh
	if set.HashedKeys {
		m.seed = maphash.MakeSeed()
		// The key is already a seeded hash: xsync need only mix in its
		// table seed.
		m.hashes = xsync.NewMapOfWithHasher[uint64, B](func(h, seed uint64) uint64 { return h ^ seed })
	} else {
		m.strs = xsync.NewMapOf[string, B]()
	}
	m.book.Init(set.MaxKeys)
	pace := MinPace
	if set.MaxKeys > 0 {
		pace = min(pace, set.MaxKeys)
	}
	m.pacer.Init(pace)
	m.bg = Start(set.SweepInterval, func() { m.Sweep() })
}

// Strings returns the map from key string to bucket, or nil if the keys
// are hashed: a store's hot path may Load from it directly (a generic
// method of Map is not inlined into the store's code).
func (m *Map[B]) Strings() *xsync.MapOf[string, B] { return m.strs }

// hash returns the map key of key in hashed mode.
func (m *Map[B]) hash(key string) uint64 { return maphash.String(m.seed, key) }

// Load returns key's bucket if the map holds one. The bucket may be
// marked keyrate.Tombstone.
func (m *Map[B]) Load(key string) (B, bool) {
	if m.hashes != nil {
		return m.hashes.Load(m.hash(key))
	}
	return m.strs.Load(key)
}

// Get returns key's bucket, inserting a full one for a new key. For a new
// key that the cap leaves no room for, after a paced sweep if one is due,
// it returns an error wrapping keyrate.ErrStoreFull. The bucket may be
// marked keyrate.Tombstone.
func (m *Map[B]) Get(key string) (B, error) {
	if m.hashes != nil {
		h := m.hash(key)
		if b, ok := m.hashes.Load(h); ok {
			return b, nil
		}
		return insert(m, m.hashes, h)
	}
	if b, ok := m.strs.Load(key); ok {
		return b, nil
	}
	return insert(m, m.strs, key)
}

// insert is Get's slow path, for a key that was missing from t.
//
// A paced sweep that falls due here runs on a goroutine of its own (see
// kick), never on the caller; but if new keys come in so fast that the
// sweep falls AssistRatio periods behind, the caller waits for it to
// finish (assist), as Go's allocating goroutines assist the garbage
// collector. When the cap leaves no room, the caller itself does a
// bounded amount of work (evictOne: at most RefusalScan buckets, stopping
// at the first it frees) and then tries once more for a slot, which a
// paced sweep running beside it may have freed too. It is refused only if
// that second try fails: every bucket it examined was live and not full at
// its reading, and whatever a sweep freed meanwhile went to other keys.
func insert[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], k K) (B, error) {
	if m.bg == nil {
		if m.pacer.Charge(1) {
			m.kick()
		} else if m.pacer.Overdue() {
			m.assist()
		}
	}
	for retried := false; ; retried = true {
		if m.book.Reserve() {
			b, loaded := t.LoadOrCompute(k, func() B { return m.fresh(Fresh) })
			if loaded {
				m.book.Release(1)
			}
			return b, nil
		}
		if b, ok := t.Load(k); ok { // inserted by someone else meanwhile
			return b, nil
		}
		if retried {
			var zero B
			return zero, m.book.Refuse()
		}
		if m.pacer.Charge(RefusalWeight) {
			m.kick()
		}
		evictOne(m, t)
	}
}

// RefusalScan is the most buckets a request for a new key examines, on its
// own goroutine, for one it can evict when the cap leaves no room.
const RefusalScan = 64

// evictOne examines at most RefusalScan buckets of t and frees the slot
// of the first that is full, or that a sweep has marked and not yet
// dropped (it drops it itself, so that the slot is free when evictOne
// returns, whichever of the two removes the key), reporting whether it
// found one.
func evictOne[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B]) bool {
	now := m.policy.Now()
	examined, found := 0, false
	t.Range(func(k K, b B) bool {
		examined++
		if b.Evict(m.policy, now, &m.floor) {
			drop(m, t, k, b)
			m.book.Evicted(1)
			found = true
		} else if b.State() == keyrate.Tombstone {
			drop(m, t, k, b)
			found = true
		}
		return !found && examined < RefusalScan
	})
	return found
}

// kick runs a paced sweep that Pacer.Charge handed to the caller, on a
// goroutine of its own so that no request waits for it (a sweep of a map
// of a million pointers takes a good fraction of a second); Close waits
// for it. After Close it runs on the caller.
func (m *Map[B]) kick() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.pacedSweep()
		return
	}
	done := make(chan struct{})
	m.inflight = done
	m.running.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.running.Done()
		defer close(done)
		m.pacedSweep()
	}()
}

// assist waits for the paced sweep in flight, if any.
func (m *Map[B]) assist() {
	m.mu.Lock()
	done := m.inflight
	m.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Fresh is the state of a bucket that Get inserted and nobody has spent
// from yet. A store reads it as the floor (Map.Floor) when it first spends.
// It is not full at any tick, so no sweep can remove a bucket between its
// insertion and its first spend (which would churn the key, and under a
// cap could let another key take its slot).
const Fresh = keyrate.Tombstone - 1

// Floor returns the state a new bucket is read as: the latest state of
// any bucket evicted (0 if none), which is full at every reading since
// that bucket was (see the package documentation).
func (m *Map[B]) Floor() keyrate.State { return m.floor.Load() }

// Floor is the state a store's new buckets start in: the greatest state of
// any bucket it evicted. It is safe for concurrent use.
type Floor struct{ v atomic.Uint64 }

// Load returns the floor.
func (f *Floor) Load() keyrate.State { return keyrate.State(f.v.Load()) }

// Start returns the state a bucket not spent from yet is read as at its
// first spend, the floor, and the tick to spend it at: now, or, if the
// floor lies ahead of now, a fresh reading of p's clock (never earlier
// than now).
//
// The reread is what keeps another key's eviction from changing this
// key's decision. The floor is raised by a sweep that read the clock at
// some tick t and found a bucket full at t, so the floor is at most t; a
// reading now older than the floor predates that sweep's (it was taken
// before the sweep evicted some other key), and spending at it would
// charge this new key the evicted bucket's debt at now. A reading taken
// after loading the floor is at least t, for a clock that never runs
// backwards in happens-before order, and there the floor is a full
// bucket, exactly what a store that never evicts would give a new key.
// Only a clock stepped backwards past the floor keeps now below it, and
// then the floor is the guard of the package documentation.
func (f *Floor) Start(p *keyrate.Rule, now uint64) (keyrate.State, uint64) {
	s := f.Load()
	if uint64(s) > now {
		now = max(now, p.Now())
	}
	return s, now
}

// Raise makes the floor at least s.
func (f *Floor) Raise(s keyrate.State) {
	for {
		old := f.v.Load()
		if old >= uint64(s) || f.v.CompareAndSwap(old, uint64(s)) {
			return
		}
	}
}

// Drop removes key from the map if it still maps to b, a bucket marked
// keyrate.Tombstone, and gives back its slot. Both the sweeper and a
// spender that found b marked call it; one of them removes the key.
func (m *Map[B]) Drop(key string, b B) {
	if m.hashes != nil {
		drop(m, m.hashes, m.hash(key), b)
	} else {
		drop(m, m.strs, key, b)
	}
}

// drop removes k from t if it maps to b, and gives back its slot. The slot
// is released inside the map's compute, under the lock of k's map bucket,
// so that anyone who no longer finds k (Range copies a map bucket's
// entries under that lock) also finds its slot free.
func drop[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], k K, b B) {
	t.Compute(k, func(old B, loaded bool) (B, bool) {
		if loaded && old == b {
			m.book.Release(1)
			return old, true
		}
		return old, !loaded // keep another bucket; insert nothing
	})
}

// Sweep removes every bucket that is full at the current tick and returns
// how many it removed. It holds at most one lock at a time (a bucket's, or
// one of xsync's bucket locks) and stops no other call.
func (m *Map[B]) Sweep() int {
	now := m.policy.Now()
	var n, kept int
	if m.hashes != nil {
		n, kept = sweep(m, m.hashes, now)
	} else {
		n, kept = sweep(m, m.strs, now)
	}
	m.book.Evicted(n)
	// The next period is the keys this sweep examined and kept, not those
	// inserted while it ran, like the heap goal after a garbage collection.
	m.pacer.Reset(kept)
	return n
}

// sweep removes the buckets of t full at tick now, and returns how many it
// removed and how many it examined and kept.
func sweep[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], now uint64) (removed, kept int) {
	t.Range(func(k K, b B) bool {
		if b.Evict(m.policy, now, &m.floor) {
			drop(m, t, k, b)
			removed++
		} else {
			kept++
		}
		return true
	})
	return removed, kept
}

// pacedSweep runs a sweep that Pacer.Charge handed to the caller.
func (m *Map[B]) pacedSweep() {
	defer m.pacer.Swept()
	m.Sweep()
}

// Len returns the number of keys the store holds, from its Book: a
// snapshot of one instant, never above the cap.
func (m *Map[B]) Len() int { return m.book.Keys() }

// Stats returns the store's keyrate.Stats.
func (m *Map[B]) Stats() keyrate.Stats { return m.book.Stats() }

// Close stops the background sweeper, if any, and waits for paced sweeps
// in flight. It is safe to call more than once.
func (m *Map[B]) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.bg.Stop()
	m.running.Wait()
	return nil
}
