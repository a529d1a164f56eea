package striped

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/keyrate/keyrate/internal/flatmap"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// table is the store's stripes. A key's hash picks its stripe by its
// top bits and its slot in the stripe's flatmap.Map by its low bits.
type table struct {
	stripes []stripe
	// shift is 63 - log2(len(stripes)): h>>1>>shift is h's stripe (its
	// top bits, none for one stripe), a shift below 64, which Go compiles
	// to one instruction (a shift by 64 or more needs a fix-up).
	shift uint
}

// stripeData is one lock and the keys it guards. Every field is written
// only under mu; m's states and the fields its Seek reads are also read
// without it (flatmap.Map.Seek).
type stripeData struct {
	// m comes first, so that the fields Seek reads (flatmap.SeekBytes)
	// start the stripe's first line, which only a change to the table
	// writes: every core keeps a copy of it.
	m flatmap.Map
	// mu is on a line Seek does not read (asserted by a test), since
	// every locked call writes it.
	mu sync.Mutex
	// seek is how many more calls on the stripe look their key up
	// without the lock first (see takeOne): set to seekCalls by a deny,
	// counted down by a spend made that way. It shares mu's line, which
	// a locked call writes anyway.
	seek atomic.Int32
	// floor is the latest reading at which any key evicted from this
	// stripe was full: a key missing from the stripe is a bucket in the
	// floor's states (see insert).
	floor sweep.Floor
}

// stripe is a stripeData padded to a whole number of cache lines, so that
// two stripes never share a line (asserted by a test).
type stripe struct {
	stripeData
	// The padding goes last, so that m starts the stripe's first line;
	// it is never of size zero (which would be given padding of its own)
	// while stripeData is not a whole number of lines, as the test checks.
	_ [(layout.CacheLine - unsafe.Sizeof(stripeData{})%layout.CacheLine) % layout.CacheLine]byte
}

// sweepChunk is how many keys a whole sweep examines under a stripe's
// lock before it lets go of the lock and takes it again, so that a call on
// that stripe waits for at most that many examinations.
const sweepChunk = 256

// sweepRestarts is how many times a whole sweep of a stripe starts over
// when the stripe's slots are rebuilt while it lets go of the lock (see
// evict): each rebuild is a growth by half or a shrink to half full, so a
// few restarts cover any realistic churn, and the bound keeps a sweep
// from chasing a table that never stops changing.
const sweepRestarts = 4

// sampled is how many keys of its stripe an insertion examines for
// eviction: a run of keys from a random slot, which hashing makes a
// random sample. While the fraction of a stripe's keys that are full
// exceeds 1/sampled, insertions evict them faster than they add keys, so a
// store without a cap holds about sampled/(sampled-1) times its keys that
// are not full (the Incremental check measured 1048 keys for 1000 live).
const sampled = 16

// minStripes is the fewest stripes newTable allocates room for: enough
// for an array past the allocator's largest small size (32 KiB), which
// starts on a page of its own. A smaller array of objects holding
// pointers starts 8 bytes into its size class's slot (Go's malloc header),
// which would put every stripe's mutex on a line with its neighbour's
// map. The unused stripes cost 32 KiB at most, once per store; with the
// default stripe count on 11 or more cores there are none.
const minStripes = 32<<10/unsafe.Sizeof(stripe{}) + 1

func newTable(s *Store, stripes int, hashed bool) *table {
	t := &table{stripes: make([]stripe, stripes, max(stripes, int(minStripes))), shift: 63}
	for n := stripes; n > 1; n >>= 1 {
		t.shift--
	}
	for i := range t.stripes {
		t.stripes[i].m.Init(&s.seed, hashed)
	}
	return t
}

// of returns the stripe of hash h.
func (t *table) of(h uint64) *stripe { return &t.stripes[t.index(h)] }

// index returns the index of hash h's stripe.
func (t *table) index(h uint64) uint64 { return h >> 1 >> (t.shift & 63) }

// take spends cost tokens for key, whose hash is h, under rs at clock
// reading now, from every window of its bucket if each holds them (or
// reserves them within wait: rules.Rules.Reserve), and
// returns the states after the call, the reading it was decided at and
// rules.Rules.Take's result. A key under another policy is carried over
// to rs first (rules.Rules.Carry). It reports full, and does nothing,
// when key is new and the cap leaves no room for it (or its stripe's
// table none: flatmap.Map.Insert).
func (t *table) take(s *Store, key string, h uint64, rs *rules.Rules, now time.Duration, cost int, wait time.Duration) (st sweep.States, at time.Duration, denied int, full bool) {
	sp := t.of(h)
	sp.mu.Lock()
	i, found := sp.m.Find(key, h)
	if !found {
		return sp.insert(s, key, h, rs, now, cost, wait) // unlocks
	}
	if sp.m.Rules(i) == rs && rs.Len() == 1 { // the hot path
		r := rs.Rule(0)
		var next rules.State
		var ok bool
		if rs.OneBucket() { // the token bucket's arithmetic, inlined
			next, ok = r.ReserveBucket(sp.m.First(i), r.Ticks(now), cost, r.WaitTicks(wait))
		} else { // a window algorithm
			next, ok = r.Reserve(sp.m.First(i), r.Ticks(now), cost, r.WaitTicks(wait))
		}
		if ok {
			sp.m.SetFirst(i, next)
		}
		sp.mu.Unlock()
		st[0] = next
		if ok {
			return st, now, -1, false
		}
		return st, now, 0, false
	}
	defer sp.mu.Unlock()
	n := rs.Len()
	if now, found = sp.load(i, rs, now, st[:n]); !found {
		return st, now, 0, true
	}
	if l := sp.m.Log(i); l != nil { // a SlidingLog policy: its log decides (it never waits)
		denied = rs.LogSpend(l, now, cost, st[:n])
	} else {
		_, denied = rs.Reserve(st[:n], now, cost, wait)
	}
	sp.m.Store(i, st[:n])
	return st, now, denied, false
}

// load loads the states of the key in slot i, under rs at reading now,
// into s, carrying a key under another policy over to rs first
// (rules.Rules.Carry) and storing it so; it returns the reading to decide
// at, and reports false, loading nothing, if the carried key does not fit
// the stripe's table. A carry reads the clock again, under the stripe's
// lock: now may predate the key's last spend, and a carry at it would
// count that spend's debt from before it was made (a key moved to a
// faster rate would then repay it early).
func (sp *stripe) load(i int, rs *rules.Rules, now time.Duration, s []rules.State) (time.Duration, bool) {
	from := sp.m.Rules(i)
	if from == rs {
		sp.m.Load(i, s)
		return now, true
	}
	now = max(now, rs.Now())
	var old sweep.States
	sp.m.Load(i, old[:from.Len()])
	rs.Carry(from, old[:from.Len()], now, s)
	return now, sp.m.SetRules(i, rs, s)
}

// seekCalls is how many calls on a stripe look their key up without the
// lock first after a deny on it (see takeOne): enough that a key denied
// again and again keeps that path while other keys of its stripe spend,
// few enough that a stripe whose keys stopped being denied soon goes back
// to the cheaper locked lookup.
const seekCalls = 64

// takeOne is the hot path of a spend, or of a reservation within wait
// ticks (rules.Rule.WaitTicks of the maximum wait; 0 for a spend), of
// cost tokens for key under rs, a policy of one window (rs.Len() == 1).
// It hashes key (the 8- to 16-byte case inlined). On a stripe that
// denied a call lately (its seek count is above zero) it hands the call
// to seekOne, which reads the clock and finds key's slot and state
// without a lock: a state that denies is the answer, and the call takes
// no lock and writes nothing. On any other stripe it reads the clock,
// locks, finds key under rs (flatmap.Map.FindUnder), applies the rule's
// arithmetic (the token bucket's inlined) and stores the state if it
// spent. It returns the state after the call, the reading t it was
// decided at, key's hash h and whether it spent. For any other key it
// reports a miss, changing nothing, with h for the slow path (take), so
// that a call hashes its key once either way. It returns no States, which
// would cost a 64-byte copy per call.
//
// The lookup without the lock (flatmap.Map.Seek) costs a spend about 70
// instructions more than the locked one on one core, so a stripe takes it
// only while it denies: the first deny of a key whose stripe has not
// denied for seekCalls calls takes the lock once, and the calls after it
// do not. Either path decides as the other would (see seekOne). The
// choice is made before the clock is read, and seekOne returns takeOne's
// results itself, so that the locked path keeps no value of the other
// across the clock's call: its frame and spills are what they were before
// the lookup without the lock existed.
func (s *Store) takeOne(key string, rs *rules.Rules, cost int, wait uint64) (state rules.State, t time.Duration, h uint64, ok, hit bool) {
	h, short := s.seed.Short(key)
	if !short {
		h = s.seed.Hash(key)
	}
	sp := s.tab.of(h)
	if sp.seek.Load() > 0 {
		return sp.seekOne(key, h, rs, cost, wait)
	}
	r := rs.Rule(0)
	t = rs.Now()
	now := r.Ticks(t)
	sp.mu.Lock()
	slot, found := sp.m.FindUnder(key, h, rs)
	if !found {
		sp.mu.Unlock()
		return 0, t, h, false, false
	}
	var next rules.State
	if rs.OneBucket() { // the token bucket's arithmetic, inlined
		next, ok = r.ReserveBucket(slot.First(), now, cost, wait)
	} else { // a window algorithm
		next, ok = r.Reserve(slot.First(), now, cost, wait)
	}
	if ok {
		slot.SetFirst(next)
	} else { // on a deny, next is the state it held, and nothing is written
		sp.seek.Store(seekCalls)
	}
	sp.mu.Unlock()
	return next, t, h, ok, true
}

// seekOne is takeOne's path on a stripe that denied lately, after the
// hash h, with takeOne's results: it reads the clock (t), then finds
// key's slot and state without the lock (flatmap.Map.Seek), and a state that denies is the answer, with no
// lock taken and nothing written. Otherwise it locks the stripe, uses the
// slot Seek found as it is if the table's sequence count has not moved
// (the key is still there, under the same policy) and the arithmetic done
// before the lock if the state is still the one it was done on, stores
// the state if it spent, and counts the stripe's seek count down.
//
// A deny without the lock is the locked path's deny: the clock is read
// before the state, as the locked path reads it before the lock, and the
// state is one atomic load, the key's state at that instant under rs (a
// state of an instant at which the table was not changing: Seek checks
// its sequence count); the arithmetic is pure, and on a deny leaves the
// state as it was. So the call is decided as a locked call that took the
// lock at that instant would be, with the same Decision. A key that is
// missing, under another policy, or in a sentinel state (sweep.Fresh and
// up), and any reading that overlapped a change to the table, take the
// lock.
func (sp *stripe) seekOne(key string, h uint64, rs *rules.Rules, cost int, wait uint64) (state rules.State, t time.Duration, _ uint64, ok, hit bool) {
	t = rs.Now()
	ver := sp.m.Version()
	var (
		slot  flatmap.Hit
		first rules.State
		found bool
	)
	if uint(len(key))-8 <= 8 { // Seed.Short's keys
		slot, first, found = sp.m.Seek(key, h, rs, ver)
	} else {
		slot, first, found = sp.m.SeekLong(key, h, rs, ver)
	}
	r := rs.Rule(0) // after the lookup: fewer values kept across its call
	now := r.Ticks(t)
	var next rules.State
	if !found {
		ver = 1 // odd: no count Version returns under the lock, so seekLocked looks again
	} else if first < sweep.Fresh {
		if rs.OneBucket() { // the token bucket's arithmetic, inlined
			next, ok = r.ReserveBucket(first, now, cost, wait)
		} else { // a window algorithm
			next, ok = r.Reserve(first, now, cost, wait)
		}
		if !ok { // denied by the state of one instant: no lock, no write
			return first, t, h, false, true
		}
	}
	state, ok, hit = sp.seekLocked(key, h, rs, now, cost, wait, slot, ver, first, next, ok)
	return state, t, h, ok, hit
}

// seekLocked is the rest of seekOne, for a call it did not deny without
// the lock, at reading now in rs's ticks: it locks the stripe, uses slot
// (the one Seek found) if the table's sequence count is still ver, else
// finds key again under rs, and reuses next, the state decided before the
// lock, if ok and the slot still holds first; else it decides on the
// state the slot holds. It stores the state if it spent, counts the
// stripe's seek count down, and returns the state after the call,
// whether it spent, and whether key is held under rs. (A function of its
// own, so that seekOne's deny keeps none of this path's values in its
// frame.)
func (sp *stripe) seekLocked(key string, h uint64, rs *rules.Rules, now uint64, cost int, wait uint64, slot flatmap.Hit, ver uint64, first, next rules.State, ok bool) (state rules.State, spent, hit bool) {
	sp.mu.Lock()
	if sp.m.Version() != ver { // missed, or the table changed since: look again
		var found bool
		if slot, found = sp.m.FindUnder(key, h, rs); !found {
			sp.mu.Unlock()
			return 0, false, false
		}
	}
	if cur := slot.First(); !ok || cur != first { // not decided before the lock on this state
		r := rs.Rule(0)
		if rs.OneBucket() {
			next, ok = r.ReserveBucket(cur, now, cost, wait)
		} else {
			next, ok = r.Reserve(cur, now, cost, wait)
		}
	}
	if ok {
		slot.SetFirst(next) // on a deny, nothing is written
		sp.seek.Add(-1)
	}
	sp.mu.Unlock()
	return next, ok, true
}

// refund gives cost tokens back to key under rs at reading now, carrying
// a key under another policy over to rs first. A missing key is full.
func (t *table) refund(key string, h uint64, rs *rules.Rules, now time.Duration, cost int) {
	sp := t.of(h)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	i, found := sp.m.Find(key, h)
	var s sweep.States
	n := rs.Len()
	if !found {
		return
	}
	if now, found = sp.load(i, rs, now, s[:n]); !found || s[0] >= sweep.Fresh {
		return
	}
	if l := sp.m.Log(i); l != nil {
		rs.LogRefund(l, now, cost, s[:n])
	} else {
		rs.Refund(s[:n], now, cost)
	}
	sp.m.Store(i, s[:n])
}

// cancel gives back the cost tokens of a reservation of key under rs that
// left window 0 in state end, with its slot at reading slot, if the key's
// bucket allows it (rules.Rules.Cancel), reading the clock under the
// stripe's lock, and reports whether it did.
func (t *table) cancel(key string, h uint64, rs *rules.Rules, end rules.State, slot time.Duration, cost int) bool {
	sp := t.of(h)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	i, found := sp.m.Find(key, h)
	if !found || sp.m.Rules(i) != rs || sp.m.First(i) >= sweep.Fresh {
		return false
	}
	var s sweep.States
	n := rs.Len()
	sp.m.Load(i, s[:n])
	if !rs.Cancel(s[:n], end, rs.Now(), slot, cost) {
		return false
	}
	sp.m.Store(i, s[:n])
	return true
}

// insert is take for a key missing from sp, called with sp.mu held; it
// releases it.
//
// A missing key is a bucket in the floor's states, the latest reading at
// which any key evicted from sp was full (none if none): a full bucket at
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
// Before inserting, it examines sampled keys of sp and evicts those that
// have been full for the grace period (any full one if the store is
// full): the store's incremental maintenance (bounded work, under the
// lock it already holds). A full store that still has no room reports
// full.
func (sp *stripe) insert(s *Store, key string, h uint64, rs *rules.Rules, now time.Duration, cost int, wait time.Duration) (states sweep.States, at time.Duration, denied int, full bool) {
	defer sp.mu.Unlock()
	if s.bg == nil || s.book.Full() { // with a background sweeper, only a full store samples
		sp.evict(s, s.routine(now), sampled)
	}
	n := rs.Len()
	now = sp.floor.Start(rs, now, states[:n])
	if _, denied = rs.Reserve(states[:n], now, cost, wait); denied >= 0 { // only for a clock that went back past the floor
		return states, now, denied, false
	}
	if !s.book.Reserve() {
		return states, now, 0, true
	}
	if !sp.m.Insert(key, h, rs, states[:n]) {
		s.book.Release(1)
		return states, now, 0, true
	}
	return states, now, -1, false
}

// full reports whether the key in slot i is full at reading now (and so
// can be evicted), raising the floor to the reading at which it became
// full if so.
func (sp *stripe) full(i int, now time.Duration) bool {
	if sp.m.First(i) >= sweep.Fresh {
		return false
	}
	var s sweep.States
	rs := sp.m.Rules(i)
	n := rs.Len()
	sp.m.Load(i, s[:n])
	if !rs.Full(s[:n], now) {
		return false
	}
	sp.floor.Raise(rs.Reading(s[:n]))
	return true
}

// evict examines up to n keys of sp, a run of slots from a random one, and
// removes those that are full at reading now, taken within the caller's
// call; sp.mu must be held. With n < 0 it examines every key, letting go
// of the lock every sweepChunk keys; if the slots are rebuilt meanwhile
// (an insertion grew the table, or an eviction shrank it), it starts over
// on the new slots, where every key it has not examined now sits (keys
// examined twice are only examined: a key is removed only if full), at
// most sweepRestarts times, so that its work stays bounded. It then gives
// back the memory of the keys it removed (flatmap.Map.Tidy).
func (sp *stripe) evict(s *Store, now time.Duration, n int) (removed int) {
	size := sp.m.Slots()
	if size == 0 || n == 0 {
		return 0
	}
	i, visits := 0, size
	if n > 0 {
		i = rand.IntN(size)
	}
	gen, restarts := sp.m.Gen(), 0
	for examined := 0; visits > 0 && n != 0; {
		if !sp.m.Used(i) {
			if i++; i == size {
				i = 0
			}
			visits--
			continue
		}
		n--
		examined++
		if sp.full(i, now) {
			sp.m.Delete(i) // the next slot's key, if any, moves into i: examined next
			removed++
		} else {
			if i++; i == size {
				i = 0
			}
			visits--
		}
		if n < 0 && examined%sweepChunk == 0 {
			sp.mu.Unlock()
			runtime.Gosched() // let a woken waiter take the lock first
			sp.mu.Lock()
			if sp.m.Gen() != gen { // rebuilt: start over on the new slots
				if restarts++; restarts > sweepRestarts {
					break // the rest waits for the next sweep
				}
				gen, size = sp.m.Gen(), sp.m.Slots()
				i, visits = 0, size
			}
		}
	}
	if removed == 0 {
		return 0
	}
	s.book.Release(removed)
	s.book.Evicted(removed)
	sp.m.Tidy()
	return removed
}

// refusalStripes is the most stripes evictOne visits: with the default
// stripe count (16 per GOMAXPROCS) every stripe of a machine of up to 64
// cores, and never more than about 25µs of uncontended locking.
const refusalStripes = 1024

// evictOne is a refused insertion's bounded search for room: it visits the
// stripes after h's in turn, one lock at a time, examining at most
// sweep.RefusalScan keys over at most refusalStripes stripes, evicts the
// full keys it examines, and stops after the first stripe where it evicted
// any. A store of at most RefusalScan keys, whose keys all sit in the
// stripes it visits, is thus searched whole.
func (t *table) evictOne(s *Store, h uint64) {
	budget := sweep.RefusalScan
	first := t.index(h)
	for i := uint64(1); i <= uint64(len(t.stripes)) && i <= refusalStripes && budget > 0; i++ {
		sp := &t.stripes[(first+i)%uint64(len(t.stripes))]
		sp.mu.Lock()
		n := min(budget, sp.m.Len())
		removed := 0
		if n > 0 {
			removed = sp.evict(s, s.pols.Now(), n)
		}
		sp.mu.Unlock()
		if removed > 0 {
			return
		}
		budget -= n
	}
}

// sweep sweeps every stripe at reading now (Store.sweepAt), one lock at a
// time, and returns the keys it removed and the keys it left.
func (t *table) sweep(s *Store, now time.Duration) (removed, left int) {
	for i := range t.stripes {
		sp := &t.stripes[i]
		sp.mu.Lock()
		removed += sp.evict(s, now, -1)
		left += sp.m.Len()
		sp.mu.Unlock()
	}
	return removed, left
}

// peek returns key's states under rs at reading now, whose hash is h, and
// the reading they hold at: a missing key's is the stripe's floor, a full
// bucket; a key under another policy is carried over to rs, but not
// stored.
func (t *table) peek(key string, h uint64, rs *rules.Rules, now time.Duration) (states sweep.States, at time.Duration) {
	sp := t.of(h)
	n := rs.Len()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	i, ok := sp.m.Find(key, h)
	if !ok {
		return states, sp.floor.Start(rs, now, states[:n])
	}
	from := sp.m.Rules(i)
	if from == rs {
		sp.m.Load(i, states[:n])
		return states, now
	}
	var old sweep.States
	sp.m.Load(i, old[:from.Len()])
	rs.Carry(from, old[:from.Len()], now, states[:n])
	return states, now
}
