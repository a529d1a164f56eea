package sweep

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
)

// States holds one key's states, one per window of its policy (at most
// keyrate.MaxLimits), by value.
type States = [keyrate.MaxLimits]rules.State

// Bucket is what a pointer store keeps per key: a pointer to one key's
// states, one per window of the policy it is under, and whatever
// synchronises them.
type Bucket interface {
	comparable
	// Rules returns the compiled policy the bucket's states are under. It
	// is fixed for the bucket's life: when the key's policy changes, the
	// bucket is retired and replaced (see Map).
	Rules() *rules.Rules
	// Evict marks the bucket rules.Tombstone if every window is full at
	// clock reading t, in one step that no spend can interleave with
	// (under the bucket's lock, or by a compare-and-swap from the state
	// judged full), and reports whether it did; before marking it raises
	// floor to the reading at which its states became full. A bucket
	// already marked, or not spent from yet, reports false.
	Evict(t time.Duration, floor *Floor) bool
	// SpendRare spends cost tokens from every window at reading t if each
	// holds them, or, with a wait above 0, reserves them for the earliest
	// slot at most wait away (rules.Rules.Reserve), and spends from no
	// window otherwise, in one step, writes the states
	// after the call, one per window, and the reading it was decided at and
	// rules.Rules.Take's result. (States are returned by value: a slice
	// passed through a generic call would escape to the heap.) A bucket not spent
	// from yet (Fresh) is read as the floor, at the reading Floor.Start
	// gives, and left in that state if the spend is denied, so that a
	// sweep can remove it. A bucket marked rules.Tombstone is left alone
	// and reported swept.
	SpendRare(t time.Duration, cost int, wait time.Duration, floor *Floor) (s States, at time.Duration, denied int, swept bool)
	// Refund gives cost tokens back to every window at reading t (see
	// rules.Rules.Refund); a bucket not spent from yet is full and is
	// left alone. A bucket marked rules.Tombstone is left alone and
	// reported swept.
	Refund(t time.Duration, cost int) (swept bool)
	// Cancel gives back the cost tokens of a reservation under the
	// bucket's policy that left window 0 in state end, with its slot at
	// reading slot, if the slot has not come and the bucket has not
	// changed since (rules.Rules.Cancel), reading the clock after
	// loading the states, in one step; it reports whether it did. A bucket
	// marked rules.Tombstone or not spent from yet gives nothing back.
	Cancel(end rules.State, slot time.Duration, cost int) bool
	// Retire marks the bucket rules.Tombstone whatever its states, so
	// that it can be replaced by a bucket under another policy, and returns
	// its states. It reports fresh for a bucket not spent from yet (s is
	// then unset), and !ok for one already marked.
	Retire() (s States, fresh, ok bool)
	// Swept reports whether the bucket is marked rules.Tombstone.
	Swept() bool
	// States returns the bucket's states and reports whether they are
	// live: false for a bucket marked rules.Tombstone or not spent from
	// yet, whose states read as the floor.
	States() (s States, live bool)
}

// Map is the key-to-bucket map of a store that keeps one pointer per key
// (mutexbucket): an xsync.MapOf keyed by the key string or,
// with keyrate.WithHashedKeys, by a 64-bit hash of it seeded per store,
// together with the store's Book, Pacer, floor and Background sweeper.
//
// Lookups of known keys are lock-free. A new key reserves a slot in the
// Book before it is inserted. Removal is two steps, in this order: the
// bucket is marked rules.Tombstone (Bucket.Evict), then deleted from the
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
	pols   *rules.Policies
	fresh  func(rs *rules.Rules, s []rules.State) B
	seed   maphash.Seed
	strs   *xsync.MapOf[string, B] // the keys, unless hashed
	hashes *xsync.MapOf[uint64, B] // the keys' hashes, if hashed
	floor  Floor                   // the latest reading an evicted bucket was full at
	book   Book
	pacer  Pacer
	bg     *Background
	grace  time.Duration // config.Settings.EvictionGrace

	mu       sync.Mutex     // guards closed, inflight and running.Add
	closed   bool           // Close was called: paced sweeps run on the caller
	inflight chan struct{}  // closed when the latest paced sweep is done
	running  sync.WaitGroup // paced sweeps in flight
}

// init sets m up for a store enforcing pols under settings set, with
// fresh building a new bucket under a policy, in states s (Fresh if s is
// nil). It starts the background sweeper if set asks for one.
func (m *Map[B]) init(pols *rules.Policies, set config.Settings, fresh func(rs *rules.Rules, s []rules.State) B) {
	m.pols, m.fresh = pols, fresh
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
	m.grace = set.EvictionGrace
	m.bg = Start(set.SweepInterval, m.routineSweep)
}

// Strings returns the map from key string to bucket, or nil if the keys
// are hashed: a store's hot path may Load from it directly (a generic
// method of Map is not inlined into the store's code).
func (m *Map[B]) Strings() *xsync.MapOf[string, B] { return m.strs }

// hash returns the map key of key in hashed mode.
func (m *Map[B]) hash(key string) uint64 { return maphash.String(m.seed, key) }

// Load returns key's bucket if the map holds one. The bucket may be
// marked rules.Tombstone.
func (m *Map[B]) Load(key string) (B, bool) {
	if m.hashes != nil {
		return m.hashes.Load(m.hash(key))
	}
	return m.strs.Load(key)
}

// Get returns key's bucket, inserting a full one under rs for a new key.
// For a new key that the cap leaves no room for, after a paced sweep if
// one is due, it returns an error wrapping keyrate.ErrStoreFull. The
// bucket may be marked rules.Tombstone, and may be under another policy
// than rs.
func (m *Map[B]) Get(key string, rs *rules.Rules) (B, error) {
	if m.hashes != nil {
		h := m.hash(key)
		if b, ok := m.hashes.Load(h); ok {
			return b, nil
		}
		return insert(m, m.hashes, h, rs)
	}
	if b, ok := m.strs.Load(key); ok {
		return b, nil
	}
	// The map keeps its own copy of a new key: the caller's may share the
	// bytes of a far larger string (a substring of a request header),
	// which the map would otherwise keep alive for as long as the key.
	return insert(m, m.strs, strings.Clone(key), rs)
}

// Replace replaces key's bucket b, whose policy is not rs, by a bucket
// under rs that carries b's states over (rules.Rules.Carry) at reading
// t: b is retired (marked rules.Tombstone, so that a spender holding it
// looks the key up again) and swapped out in one step under the map's lock
// for key. A b already swept, or not spent from yet, is replaced by a new
// bucket. If the map no longer holds b, Replace does nothing: someone else
// removed or replaced it, and the caller looks the key up again.
func (m *Map[B]) Replace(key string, b B, rs *rules.Rules, t time.Duration) {
	if m.hashes != nil {
		replace(m, m.hashes, m.hash(key), b, rs, t)
	} else {
		replace(m, m.strs, key, b, rs, t)
	}
}

func replace[K comparable, B Bucket](m *Map[B], tab *xsync.MapOf[K, B], k K, b B, rs *rules.Rules, t time.Duration) {
	tab.Compute(k, func(old B, loaded bool) (B, bool) {
		if !loaded {
			return old, true // gone: insert nothing
		}
		if old != b {
			return old, false // replaced already
		}
		var into States
		from := b.Rules()
		s, fresh, ok := b.Retire()
		if !ok || fresh {
			return m.fresh(rs, nil), false // the slot stays this key's
		}
		// Carried at a reading no older than the bucket's last spend,
		// which Retire follows: at an older one a key moved to a faster
		// rate would repay that spend's debt early.
		rs.Carry(from, s[:from.Len()], max(t, m.pols.Now()), into[:rs.Len()])
		return m.fresh(rs, into[:rs.Len()]), false
	})
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
func insert[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], k K, rs *rules.Rules) (B, error) {
	if m.bg == nil {
		if m.pacer.Charge(1) {
			m.kick()
		} else if m.pacer.Overdue() {
			m.assist()
		}
	}
	for retried := false; ; retried = true {
		if m.book.Reserve() {
			b, loaded := t.LoadOrCompute(k, func() B { return m.fresh(rs, nil) })
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
	now := m.pols.Now()
	examined, found := 0, false
	t.Range(func(k K, b B) bool {
		examined++
		if b.Evict(now, &m.floor) {
			drop(m, t, k, b)
			m.book.Evicted(1)
			found = true
		} else if b.Swept() {
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
const Fresh = rules.Tombstone - 1

// Floor returns the store's floor (see Floor).
func (m *Map[B]) Floor() *Floor { return &m.floor }

// Floor is the state a store's new buckets start in: the latest clock
// reading at which any bucket it evicted became full (rules.Rules.Reading),
// which each window reads as its ticks at that reading. Kept as a reading
// rather than a state, it serves every policy of the store. Its zero value
// is the earliest reading, math.MinInt64, so that a store whose clock
// reads below 0 (a clock.Manual set there) gives new keys full buckets. It
// is safe for concurrent use.
type Floor struct {
	v atomic.Int64 // the reading with its sign bit flipped, so that 0 is math.MinInt64
}

// Load returns the floor.
func (f *Floor) Load() time.Duration { return time.Duration(f.v.Load() ^ math.MinInt64) }

// Start fills s, one state per window of rs, with the states a bucket not
// spent from yet is read as at its first spend (the floor), and returns
// the reading to spend at: t, or, if the floor lies ahead of t, a fresh
// reading of the clock (never earlier than t).
//
// The reread is what keeps another key's eviction from changing this
// key's decision. The floor is raised by a sweep that read the clock at
// some reading r and found a bucket full at r, so the floor is at most r;
// a reading t older than the floor predates that sweep's (it was taken
// before the sweep evicted some other key), and spending at it would
// charge this new key the evicted bucket's debt at t. A reading taken
// after loading the floor is at least r, for a clock that never runs
// backwards in happens-before order, and there the floor is a full
// bucket, exactly what a store that never evicts would give a new key.
// Only a clock stepped backwards past the floor keeps t below it, and
// then the floor is the guard of the package documentation.
func (f *Floor) Start(rs *rules.Rules, t time.Duration, s []rules.State) time.Duration {
	fl := f.Load()
	if fl > t {
		t = max(t, rs.Now())
	}
	rs.FullStates(fl, s)
	return t
}

// Raise makes the floor at least t.
func (f *Floor) Raise(t time.Duration) {
	for {
		old := f.v.Load()
		if old^math.MinInt64 >= int64(t) || f.v.CompareAndSwap(old, int64(t)^math.MinInt64) {
			return
		}
	}
}

// Drop removes key from the map if it still maps to b, a bucket marked
// rules.Tombstone, and gives back its slot. Both the sweeper and a
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
func (m *Map[B]) Sweep() int { return m.sweepAt(m.pols.Now()) }

// routineSweep is a paced or background sweep: it removes the buckets that
// have been full for the grace period (Grace), or every full one if the
// store is full.
func (m *Map[B]) routineSweep() {
	now := m.pols.Now()
	if !m.book.Full() {
		now = Grace(now, m.grace)
	}
	m.sweepAt(now)
}

// Grace returns the reading a routine sweep at reading now evicts at:
// now − grace, so that only buckets full since then go, saturating at the
// earliest reading.
func Grace(now, grace time.Duration) time.Duration {
	if now < math.MinInt64+grace {
		return math.MinInt64
	}
	return now - grace
}

// sweepAt removes every bucket full at reading now, and returns how many.
func (m *Map[B]) sweepAt(now time.Duration) int {
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
func sweep[K comparable, B Bucket](m *Map[B], t *xsync.MapOf[K, B], now time.Duration) (removed, kept int) {
	t.Range(func(k K, b B) bool {
		if b.Evict(now, &m.floor) {
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
	m.routineSweep()
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
