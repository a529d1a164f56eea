package striped

import (
	"runtime"
	"sync"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/sweep"
)

// table is the store's stripes, with keys of type K: the key string, or
// with keyrate.WithHashedKeys its 64-bit hash, which makes the maps
// pointer-free. The code is the same for both.
type table[K comparable] struct {
	stripes []stripe[K]
}

// stripe is one lock and the keys it guards, padded to a whole cache line
// so that two stripes' locks never share a line (asserted by a test). Every
// field is guarded by mu.
type stripe[K comparable] struct {
	mu sync.Mutex
	m  map[K]keyrate.State
	// floor is the latest state of any key evicted from this stripe: a
	// key missing from the stripe is a bucket in state floor (see insert).
	floor uint64
	// peak is the most keys m has held since it was made: Go maps never
	// shrink, so a stripe whose map falls to a quarter of its peak is
	// rebuilt.
	peak int32
	// gen counts rebuilds of m, so that a sweep that let go of the lock
	// can tell that the map it was ranging over has been replaced.
	gen uint32
	_   [layout.CacheLine - 32]byte // pad: mutex 8, map 8, floor 8, peak 4, gen 4 to one line
}

// sweepChunk is how many keys a whole sweep examines under a stripe's
// lock before it lets go of the lock and takes it again, so that a call on
// that stripe waits for at most that many examinations.
const sweepChunk = 256

// sampled is how many keys of its stripe an insertion examines for
// eviction. Go starts every range over a map at a random entry, so this is
// a random sample: while the fraction of a stripe's keys that are full
// exceeds 1/sampled, insertions evict them faster than they add keys, so a
// store without a cap holds about sampled/(sampled-1) times its keys that
// are not full (the Incremental check measured 1048 keys for 1000 live).
const sampled = 16

func newTable[K comparable](stripes int) *table[K] {
	t := &table[K]{stripes: make([]stripe[K], stripes)}
	for i := range t.stripes {
		t.stripes[i].m = make(map[K]keyrate.State)
	}
	return t
}

// take spends cost tokens for key, whose hash is h, at tick now if its
// bucket holds them, and returns the state after the call and the tick it
// was decided at. It reports full, and does nothing, when key is new and
// the cap leaves no room for it.
func (t *table[K]) take(s *Store, key K, h, now uint64, cost int) (state keyrate.State, at uint64, ok, full bool) {
	st := &t.stripes[h&s.mask]
	st.mu.Lock()
	old, found := st.m[key]
	if !found {
		return st.insert(s, key, now, cost) // unlocks
	}
	next, ok := s.policy.Take(old, now, cost)
	if ok {
		st.m[key] = next
	}
	st.mu.Unlock()
	return next, now, ok, false
}

// insert is take for a key missing from st, called with st.mu held; it
// releases it.
//
// A missing key is a bucket in state st.floor, the latest state of any key
// evicted from st (0 if none): a full bucket at every tick from the floor
// on, where it agrees with every evicted bucket, and before it one with
// fewer tokens than theirs. The reading now was taken before the lock, so
// it may predate a sweep that ran while this call waited and evicted this
// very key: if it is older than the floor it is read again, under the
// lock, and so no older than the sweep's reading, at which the evicted
// bucket was full, for a clock that never runs backwards. The request is
// then decided as it would be by a store that never evicts, had it read
// the clock a moment later within this call.
//
// Before inserting, it examines sampled keys of st and evicts those that
// are full: the store's incremental maintenance (bounded work, under the
// lock it already holds). A full store that still has no room reports
// full.
func (st *stripe[K]) insert(s *Store, key K, now uint64, cost int) (keyrate.State, uint64, bool, bool) {
	defer st.mu.Unlock()
	if s.bg == nil || s.book.Full() { // with a background sweeper, only a full store samples
		st.evict(s, now, sampled)
	}
	if now < st.floor {
		now = s.policy.Now()
	}
	next, ok := s.policy.Take(keyrate.State(st.floor), now, cost)
	if !ok { // only for a clock that went back past the floor
		return keyrate.State(st.floor), now, false, false
	}
	if !s.book.Reserve() {
		return 0, now, false, true
	}
	st.m[key] = next
	st.peak = max(st.peak, int32(min(len(st.m), 1<<30)))
	return next, now, true, false
}

// evict examines up to n keys of st, in Go's random map order, and
// removes those that are full at tick now, a reading of the clock taken
// within the caller's call; st.mu must be held. With n < 0 it examines
// every key, letting go of the lock every sweepChunk keys (Go allows a map
// to change while it is ranged over; the lock orders those changes with
// this loop), and stops early if the map is rebuilt meanwhile. It rebuilds
// the map once it has fallen to a quarter of its peak.
func (st *stripe[K]) evict(s *Store, now uint64, n int) (removed int) {
	examined, gen := 0, st.gen
	for k, v := range st.m {
		if n == 0 {
			break
		}
		n--
		if s.policy.Full(v, now) {
			st.floor = max(st.floor, uint64(v))
			delete(st.m, k)
			removed++
		}
		if examined++; n < 0 && examined%sweepChunk == 0 {
			st.mu.Unlock()
			runtime.Gosched() // let a woken waiter take the lock first
			st.mu.Lock()
			if st.gen != gen { // the rest waits for the next sweep
				break
			}
		}
	}
	if removed == 0 {
		return 0
	}
	s.book.Release(removed)
	s.book.Evicted(removed)
	if left := len(st.m); left*4 < int(st.peak) && st.peak > 4*sampled {
		m := make(map[K]keyrate.State, left)
		for k, v := range st.m {
			m[k] = v
		}
		st.m, st.peak = m, int32(left)
		st.gen++
	}
	return removed
}

// refusalStripes is the most stripes evictOne visits: with the default
// stripe count (16 per GOMAXPROCS) every stripe of a machine of up to 64
// cores, and never more than about 25µs of uncontended locking.
const refusalStripes = 1024

// evictOne is a refused insertion's bounded search for room: it visits the
// stripes after stripe h in turn, one lock at a time, examining at most
// sweep.RefusalScan keys over at most refusalStripes stripes, evicts the
// full keys it examines, and stops after the first stripe where it evicted
// any. A store of at most RefusalScan keys, whose keys all sit in the
// stripes it visits, is thus searched whole.
func (t *table[K]) evictOne(s *Store, h uint64) {
	budget := sweep.RefusalScan
	for i := uint64(1); i <= uint64(len(t.stripes)) && i <= refusalStripes && budget > 0; i++ {
		st := &t.stripes[(h+i)&s.mask]
		st.mu.Lock()
		n := min(budget, len(st.m))
		removed := 0
		if n > 0 {
			removed = st.evict(s, s.policy.Now(), n)
		}
		st.mu.Unlock()
		if removed > 0 {
			return
		}
		budget -= n
	}
}

// sweep sweeps every stripe, one lock at a time, and returns the keys it
// removed and the keys it left.
func (t *table[K]) sweep(s *Store) (removed, left int) {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		removed += st.evict(s, s.policy.Now(), -1)
		left += len(st.m)
		st.mu.Unlock()
	}
	return removed, left
}

// peek returns key's state, whose hash is h: a missing key's is the
// stripe's floor, a full bucket.
func (t *table[K]) peek(key K, h uint64) keyrate.State {
	st := &t.stripes[h&uint64(len(t.stripes)-1)]
	st.mu.Lock()
	state, ok := st.m[key]
	if !ok {
		state = keyrate.State(st.floor)
	}
	st.mu.Unlock()
	return state
}
