package sweep

import (
	"hash/maphash"
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
	// reports whether it did. A bucket already marked reports false.
	Evict(p *keyrate.Policy, now uint64) bool
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
// Paced sweeps run on the goroutine that inserts a new key, after as many
// insertions as the previous sweep left keys (at least MinPace, or the
// cap): amortised one key examined per insertion, but a whole sweep on
// that one call. With a background sweeper they are off, except when the
// cap refuses a key. Set a Map up with Init; it is safe for concurrent use.
type Map[B Bucket] struct {
	policy *keyrate.Policy
	fresh  func(keyrate.State) B
	seed   maphash.Seed
	strs   *xsync.MapOf[string, B] // the keys, unless hashed
	hashes *xsync.MapOf[uint64, B] // the keys' hashes, if hashed
	floor  atomic.Uint64           // the latest tick a sweep read
	book   Book
	pacer  Pacer
	bg     *Background
}

// Init sets m up for a store enforcing policy under settings set, with
// fresh building a new bucket in the given (full) state. It starts the
// background sweeper if set asks for one.
func (m *Map[B]) Init(policy *keyrate.Policy, set keyrate.Settings, fresh func(keyrate.State) B) {
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

// insert is Get's slow path, for a key that was missing from t. A paced
// sweep, when due, runs first: before the insertion (so that a new bucket,
// full until its first spend, is never swept before it is spent from) and
// before the reservation (so that it can make room).
func insert[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], k K) (B, error) {
	if m.bg == nil && m.pacer.Charge(1) {
		m.pacedSweep()
	}
	for swept := false; ; swept = true {
		if !m.book.Reserve() {
			if b, ok := t.Load(k); ok { // inserted by someone else meanwhile
				return b, nil
			}
			if !swept && m.pacer.Charge(RefusalWeight) {
				m.pacedSweep()
				continue
			}
			var zero B
			return zero, m.book.Refuse()
		}
		b, loaded := t.LoadOrCompute(k, func() B { return m.fresh(m.Floor()) })
		if loaded {
			m.book.Release(1)
		}
		return b, nil
	}
}

// Floor returns the state a new bucket starts in: the latest tick a sweep
// read, which is full at every reading since (see the package
// documentation).
func (m *Map[B]) Floor() keyrate.State { return keyrate.State(m.floor.Load()) }

// raiseFloor makes the floor at least now.
func (m *Map[B]) raiseFloor(now uint64) {
	for {
		f := m.floor.Load()
		if f >= now || m.floor.CompareAndSwap(f, now) {
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

func drop[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], k K, b B) {
	removed := false
	t.Compute(k, func(old B, loaded bool) (B, bool) {
		if loaded && old == b {
			removed = true
			return old, true
		}
		return old, !loaded // keep another bucket; insert nothing
	})
	if removed {
		m.book.Release(1)
	}
}

// Sweep removes every bucket that is full at the current tick and returns
// how many it removed. It holds at most one lock at a time (a bucket's, or
// one of xsync's bucket locks) and stops no other call.
func (m *Map[B]) Sweep() int {
	// The floor is raised before any bucket is marked, so that a spender
	// that sees a mark and builds a fresh bucket starts it at a floor at
	// least the reading that judged the old one full.
	now := m.policy.Now()
	m.raiseFloor(now)
	var n int
	if m.hashes != nil {
		n = sweep(m, m.hashes, now)
	} else {
		n = sweep(m, m.strs, now)
	}
	m.book.Evicted(n)
	m.pacer.Reset(m.Len())
	return n
}

func sweep[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], now uint64) int {
	n := 0
	t.Range(func(k K, b B) bool {
		if b.Evict(m.policy, now) {
			drop(m, t, k, b)
			n++
		}
		return true
	})
	return n
}

// pacedSweep runs a sweep that Pacer.Charge handed to the caller.
func (m *Map[B]) pacedSweep() {
	defer m.pacer.Swept()
	m.Sweep()
}

// Len returns the number of keys in the map.
func (m *Map[B]) Len() int {
	if m.hashes != nil {
		return m.hashes.Size()
	}
	return m.strs.Size()
}

// Stats returns the store's keyrate.Stats.
func (m *Map[B]) Stats() keyrate.Stats { return m.book.Stats(m.Len()) }

// Close stops the background sweeper, if any. It is safe to call more than
// once.
func (m *Map[B]) Close() error {
	m.bg.Stop()
	return nil
}
