package striped

import (
	"runtime"
	"sync"
	"time"

	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/rules"
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
	m  map[K]sweep.Block
	// floor is the latest reading at which any key evicted from this
	// stripe was full: a key missing from the stripe is a bucket in the
	// floor's states (see insert).
	floor sweep.Floor
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
		t.stripes[i].m = make(map[K]sweep.Block)
	}
	return t
}

// take spends cost tokens for key, whose hash is h, under rs at clock
// reading now, from every window of its bucket if each holds them (or
// reserves them within wait: rules.Rules.Reserve), and
// returns the states after the call, the reading it was decided at and
// rules.Rules.Take's result. A key under another policy is carried over
// to rs first (rules.Rules.Carry). It reports full, and does nothing,
// when key is new and the cap leaves no room for it.
func (t *table[K]) take(s *Store, key K, h uint64, rs *rules.Rules, now time.Duration, cost int, wait time.Duration) (st sweep.States, at time.Duration, denied int, full bool) {
	sp := &t.stripes[h&s.mask]
	sp.mu.Lock()
	e, found := sp.m[key]
	if !found {
		return sp.insert(s, key, rs, now, cost, wait) // unlocks
	}
	if e.Rules == rs && rs.Len() == 1 { // the hot path
		r := rs.Rule(0)
		var next rules.State
		var ok bool
		if rs.OneBucket() { // the token bucket's arithmetic, inlined
			next, ok = r.ReserveBucket(e.First, r.Ticks(now), cost, r.WaitTicks(wait))
		} else { // a window algorithm
			next, ok = r.Reserve(e.First, r.Ticks(now), cost, r.WaitTicks(wait))
		}
		if ok {
			e.First = next
			sp.m[key] = e
		}
		sp.mu.Unlock()
		st[0] = next
		if ok {
			return st, now, -1, false
		}
		return st, now, 0, false
	}
	if e.Rules != rs {
		e = carry(e, rs, now)
	}
	at, denied = e.Spend(now, cost, wait, &sp.floor, st[:rs.Len()])
	sp.m[key] = e
	sp.mu.Unlock()
	return st, at, denied, false
}

// takeOne is take's hot path, for a key st holds under rs, a policy of one
// window whose rule is r, at tick now, with a wait of wait ticks (0 for a
// spend): it returns the state after the call and whether it spent. It reports a miss, and does nothing, for any other
// key. It returns no States, which would cost a 64-byte copy per call.
func (t *table[K]) takeOne(s *Store, key K, h uint64, rs *rules.Rules, r *rules.Rule, now uint64, cost int, wait uint64) (state rules.State, ok, hit bool) {
	sp := &t.stripes[h&s.mask]
	sp.mu.Lock()
	e, found := sp.m[key]
	if !found || e.Rules != rs {
		sp.mu.Unlock()
		return 0, false, false
	}
	var next rules.State
	if rs.OneBucket() { // the token bucket's arithmetic, inlined
		next, ok = r.ReserveBucket(e.First, now, cost, wait)
	} else { // a window algorithm
		next, ok = r.Reserve(e.First, now, cost, wait)
	}
	if ok {
		e.First = next
		sp.m[key] = e
	}
	sp.mu.Unlock()
	return next, ok, true
}

// carry returns the block of a key whose block e is under another policy
// than rs, carried over to rs at reading now (rules.Rules.Carry).
func carry(e sweep.Block, rs *rules.Rules, now time.Duration) sweep.Block {
	var old, into sweep.States
	e.Load(old[:e.Rules.Len()])
	rs.Carry(e.Rules, old[:e.Rules.Len()], now, into[:rs.Len()])
	return sweep.NewBlock(rs, into[:rs.Len()])
}

// refund gives cost tokens back to key under rs at reading now, carrying
// a key under another policy over to rs first. A missing key is full.
func (t *table[K]) refund(s *Store, key K, h uint64, rs *rules.Rules, now time.Duration, cost int) {
	sp := &t.stripes[h&s.mask]
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e, found := sp.m[key]
	if !found {
		return
	}
	if e.Rules != rs {
		e = carry(e, rs, now)
	}
	e.Refund(now, cost)
	sp.m[key] = e
}

// cancel gives back the cost tokens of a reservation of key under rs that
// left window 0 in state end, with its slot at reading slot, if the key's
// bucket allows it (sweep.Block.Cancel), reading the clock under the
// stripe's lock, and reports whether it did.
func (t *table[K]) cancel(s *Store, key K, h uint64, rs *rules.Rules, end rules.State, slot time.Duration, cost int) bool {
	sp := &t.stripes[h&s.mask]
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e, found := sp.m[key]
	if !found || e.Rules != rs || !e.Cancel(end, rs.Now(), slot, cost) {
		return false
	}
	sp.m[key] = e
	return true
}

// insert is take for a key missing from st, called with st.mu held; it
// releases it.
//
// A missing key is a bucket in the floor's states, the latest reading at
// which any key evicted from st was full (none if none): a full bucket at
// every reading from the floor on, where it agrees with every evicted
// bucket, and before it one with fewer tokens than theirs. The reading now
// was taken before the lock, so it may predate a sweep that ran while
// this call waited and evicted this very key: if it is older than the
// floor it is read again, under the lock, and so no older than the
// sweep's reading, at which the evicted bucket was full, for a clock that
// never runs backwards. The request is then decided as it would be by a
// store that never evicts, had it read the clock a moment later within
// this call.
//
// Before inserting, it examines sampled keys of st and evicts those that
// have been full for the grace period (any full one if the store is
// full): the store's incremental maintenance (bounded work, under the
// lock it already holds). A full store that still has no room reports
// full.
func (st *stripe[K]) insert(s *Store, key K, rs *rules.Rules, now time.Duration, cost int, wait time.Duration) (states sweep.States, at time.Duration, denied int, full bool) {
	defer st.mu.Unlock()
	if s.bg == nil || s.book.Full() { // with a background sweeper, only a full store samples
		st.evict(s, s.routine(now), sampled)
	}
	n := rs.Len()
	now = st.floor.Start(rs, now, states[:n])
	if _, denied = rs.Reserve(states[:n], now, cost, wait); denied >= 0 { // only for a clock that went back past the floor
		return states, now, denied, false
	}
	if !s.book.Reserve() {
		return states, now, 0, true
	}
	st.m[key] = sweep.NewBlock(rs, states[:n])
	st.peak = max(st.peak, int32(min(len(st.m), 1<<30)))
	return states, now, -1, false
}

// evict examines up to n keys of st, in Go's random map order, and
// removes those that are full at tick now, a reading of the clock taken
// within the caller's call; st.mu must be held. With n < 0 it examines
// every key, letting go of the lock every sweepChunk keys (Go allows a map
// to change while it is ranged over; the lock orders those changes with
// this loop), and stops early if the map is rebuilt meanwhile. It rebuilds
// the map once it has fallen to a quarter of its peak.
func (st *stripe[K]) evict(s *Store, now time.Duration, n int) (removed int) {
	examined, gen := 0, st.gen
	for k, v := range st.m {
		if n == 0 {
			break
		}
		n--
		if v.Full(now, &st.floor) {
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
		m := make(map[K]sweep.Block, left)
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
			removed = st.evict(s, s.pols.Now(), n)
		}
		st.mu.Unlock()
		if removed > 0 {
			return
		}
		budget -= n
	}
}

// sweep sweeps every stripe at reading now (Store.sweepAt), one lock at a
// time, and returns the keys it removed and the keys it left.
func (t *table[K]) sweep(s *Store, now time.Duration) (removed, left int) {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		removed += st.evict(s, now, -1)
		left += len(st.m)
		st.mu.Unlock()
	}
	return removed, left
}

// peek returns key's states under rs at reading now, whose hash is h, and
// the reading they hold at: a missing key's is the stripe's floor, a full
// bucket; a key under another policy is carried over to rs, but not
// stored.
func (t *table[K]) peek(key K, h uint64, rs *rules.Rules, now time.Duration) (states sweep.States, at time.Duration) {
	st := &t.stripes[h&uint64(len(t.stripes)-1)]
	n := rs.Len()
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[key]
	switch {
	case !ok:
		now = st.floor.Start(rs, now, states[:n])
	case e.Rules == rs:
		e.Load(states[:n])
	default:
		e = carry(e, rs, now)
		e.Load(states[:n])
	}
	return states, now
}
