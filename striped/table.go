package striped

import (
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
	pace    int32 // the fewest insertions between two sweeps of a stripe
}

// stripe is one lock and the keys it guards, padded to a whole cache line
// so that two stripes' locks never share a line (asserted by a test). Every
// field is guarded by mu.
type stripe[K comparable] struct {
	mu sync.Mutex
	m  map[K]keyrate.State
	// floor is the latest tick a sweep of this stripe read: a key missing
	// from the stripe is a bucket in state floor (see take).
	floor uint64
	// inserts counts insertions since the stripe's last sweep; a sweep is
	// due when it reaches pace, the keys that sweep left (at least the
	// table's pace).
	inserts, pace int32
	// peak is the most keys m has held since it was made: Go maps never
	// shrink, so a sweep that leaves m at a quarter of its peak rebuilds it.
	peak int32
	_    [layout.CacheLine - 36]byte // pad: mutex 8, map 8, floor 8, counters 12 to one line
}

// minStripePace is the fewest insertions between two sweeps of a stripe,
// and pace the stripe's share of sweep.MinPace if that is more: so that
// the keys a store without a cap leaves unswept are about the same with
// any number of stripes.
const minStripePace = 8

func newTable[K comparable](stripes int) *table[K] {
	t := &table[K]{stripes: make([]stripe[K], stripes)}
	t.pace = int32(max(minStripePace, sweep.MinPace/stripes))
	for i := range t.stripes {
		t.stripes[i].m = make(map[K]keyrate.State)
		t.stripes[i].pace = t.pace
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
		return st.insert(s, t, key, now, cost) // unlocks
	}
	next, ok := s.policy.Take(old, now, cost)
	if ok {
		st.m[key] = next
	}
	st.mu.Unlock()
	return next, now, ok, false
}

// insert is take for a key missing from st, called and returning with
// st.mu held and released respectively.
//
// A missing key is a bucket in state st.floor, the latest tick a sweep of
// st read: a key swept then was full at that tick, so for every reading
// from the floor on the two agree (and before it the floor holds fewer
// tokens). The reading now was taken before the lock, so it may predate a
// sweep that ran while this call waited: it is then read again, under the
// lock, and so no older than the sweep's for a clock that never runs
// backwards; the request is decided as it would be by a store that never
// evicts, had it read the clock a moment later within this call.
func (st *stripe[K]) insert(s *Store, t *table[K], key K, now uint64, cost int) (keyrate.State, uint64, bool, bool) {
	defer st.mu.Unlock()
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
	if st.inserts++; st.inserts >= st.pace && s.bg == nil {
		s.book.Evicted(st.sweep(s, t.pace))
	}
	return next, now, true, false
}

// sweep removes every key of st that is full now and returns how many it
// removed; st.mu must be held. pace is the table's.
func (st *stripe[K]) sweep(s *Store, pace int32) int {
	now := s.policy.Now()
	st.floor = max(st.floor, now)
	n := 0
	for k, v := range st.m {
		if s.policy.Full(v, now) {
			delete(st.m, k)
			n++
		}
	}
	s.book.Release(n)
	if left := len(st.m); left*4 < int(st.peak) && st.peak > pace {
		m := make(map[K]keyrate.State, left)
		for k, v := range st.m {
			m[k] = v
		}
		st.m, st.peak = m, int32(left)
	}
	st.inserts, st.pace = 0, max(int32(len(st.m)), pace)
	return n
}

// sweep sweeps every stripe, one lock at a time, and returns the keys it
// removed and the keys it left.
func (t *table[K]) sweep(s *Store) (removed, left int) {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		removed += st.sweep(s, t.pace)
		left += len(st.m)
		st.mu.Unlock()
	}
	s.book.Evicted(removed)
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

// len returns the keys in every stripe, locking one stripe at a time.
func (t *table[K]) len() int {
	n := 0
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		n += len(st.m)
		st.mu.Unlock()
	}
	return n
}
