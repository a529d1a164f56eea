package casmap

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// The arena's and the slots' bounds.
const (
	offBits  = 16             // a record's offset in its chunk
	offMask  = 1<<offBits - 1 //
	locMask  = 1<<32 - 1      // a meta's chunk and offset
	minChunk = 256            // the first chunk's size
	maxChunk = 1 << offBits   // the largest shared chunk; a larger record gets its own
	// maxChunks is the most chunks an insertion lets a table's arena
	// grow to (2 GiB of full-size chunks): half of what a meta's 16 bits
	// of chunk index can name, so that a rebuild, which packs the same
	// live records into chunks of the same sizes, never runs out.
	maxChunks = 1 << 15
	minSlots  = 8
	maxSlots  = 1 << 30
	// sweepChunk is how many keys a whole sweep examines under a
	// segment's lock before it lets go of it and takes it again.
	sweepChunk = 256
)

// table is one segment's slots and arena (see the package
// documentation). slots and hashed are fixed; chunks is published
// atomically; the rest is guarded by the segment's lock.
type table struct {
	slots  []slot
	chunks atomic.Pointer[[][]byte]
	hashed bool
	used   int // slots not empty: live and dead
	live   int // live slots
	fill   int // bytes used of the last chunk
}

// empty returns an empty table of minSlots slots: a segment always has a
// table, so that a lookup need not check for none.
func (m *Map) empty() *table {
	t := &table{slots: make([]slot, minSlots), hashed: m.hashed}
	t.chunks.Store(new([][]byte))
	return t
}

// chunkOf returns the chunk of t's arena that meta names. It must be
// called after loading meta.
func chunkOf(t *table, meta uint64) []byte {
	return (*t.chunks.Load())[meta&locMask>>offBits]
}

// sizeFor returns the slots of a table built for n live keys: 7/12 full,
// so that it takes n/2 more insertions before it is 7/8 full.
func sizeFor(n int) int { return max(minSlots, n*12/7+1) }

// alloc returns room for a record of size bytes in t's arena and its
// location (chunk and offset), growing the arena by a chunk if need be,
// unless it already holds limit chunks.
func (t *table) alloc(size, limit int) (loc uint64, rec []byte, ok bool) {
	cs := *t.chunks.Load()
	if n := len(cs); n > 0 {
		if last := cs[n-1]; t.fill+size <= len(last) {
			off := t.fill
			t.fill += size
			return uint64(n-1)<<offBits | uint64(off), last[off:t.fill:t.fill], true
		}
	}
	if len(cs) >= limit {
		return 0, nil, false
	}
	c := minChunk
	if n := len(cs); n > 0 {
		c = min(maxChunk, 2*len(cs[n-1]))
	}
	chunk := make([]byte, max(c, size))
	// Appending writes past the length readers see (or copies): they
	// reach the new chunk only by the Store below.
	next := append(cs, chunk)
	t.chunks.Store(&next)
	t.fill = size
	return uint64(len(cs)) << offBits, chunk[:size:size], true
}

// place puts a key of hash h, state v and meta into the first empty slot
// of its probe sequence: after every slot its key used before (dead ones
// included), so that a reader finds its live slot last. The state is
// stored before the meta that publishes the slot.
func (t *table) place(h uint64, v rules.State, meta uint64) {
	i := home(h, len(t.slots))
	for t.slots[i].meta.Load() != 0 {
		if i++; i == len(t.slots) {
			i = 0
		}
	}
	t.slots[i].state.Store(uint64(v))
	t.slots[i].meta.Store(meta)
	t.used++
	t.live++
}

// Insert adds key, whose hash is h and which sg must not hold live, under
// rs in states s (one per window of rs); sg's lock must be held. It
// reports false, changing nothing, when the segment's arena would pass 2
// GiB, its policy index 65535 policies or its slots 2^30. It may rebuild
// sg's table.
func (m *Map) Insert(sg *Segment, key string, h uint64, rs *rules.Rules, s []rules.State) bool {
	pd, ok := m.Prepare(sg, key, h, rs)
	if ok {
		m.Commit(sg, pd, s)
	}
	return ok
}

// Pending is a slot and a record that Prepare set aside for a key, not
// yet published: Commit publishes it.
type Pending struct {
	t    *table
	loc  uint64 // the record's chunk and offset
	rec  []byte
	pol  int // the policy's index entry, referenced for the key
	klen int // the bytes of the record's key part
	h    uint64
}

// Prepare is the first half of Insert: it makes room for key, whose hash
// is h, under rs (rebuilding sg's table if it must), takes rs's policy
// index entry and writes the key into a new record, publishing nothing
// but a rebuilt table; sg's lock must be held, and Commit must follow
// under the same hold. It reports false, changing nothing but for a
// rebuild, where Insert would. A caller that moves a key to another
// policy prepares before it retires the key's old slot, so that a key
// the segment cannot take keeps its slot and its states; since Prepare
// may rebuild the table, it then finds the old slot again.
func (m *Map) Prepare(sg *Segment, key string, h uint64, rs *rules.Rules) (Pending, bool) {
	t := sg.tab.Load()
	if (t.used+1)*8 > len(t.slots)*7 {
		if !m.rebuild(sg, sizeFor(t.live+1)) {
			return Pending{}, false
		}
		t = sg.tab.Load()
	}
	p, ok := sg.policy(rs)
	if !ok {
		return Pending{}, false
	}
	klen := 8
	if !m.hashed {
		klen = uvarintLen(len(key)) + len(key)
	}
	loc, rec, ok := t.alloc(klen+8*(rs.Len()-1), maxChunks)
	if !ok {
		sg.unref(p)
		return Pending{}, false
	}
	if m.hashed {
		binary.LittleEndian.PutUint64(rec, h)
	} else {
		w := binary.PutUvarint(rec, uint64(len(key)))
		copy(rec[w:], key)
	}
	return Pending{t: t, loc: loc, rec: rec, pol: p, klen: klen, h: h}, true
}

// Commit publishes the key Prepare set aside in states s (one per window
// of its policy): the other windows' states into its record, then its
// slot.
func (m *Map) Commit(sg *Segment, pd Pending, s []rules.State) {
	for j, v := range s[1:] {
		binary.LittleEndian.PutUint64(pd.rec[pd.klen+8*j:], uint64(v))
	}
	pd.t.place(pd.h, s[0], pd.loc|uint64(pd.pol)<<polShift|tag(pd.h))
}

// rebuild moves sg's live keys into a new table of size slots and
// publishes it; sg's lock must be held. Each live slot is swapped to Moved
// first (waiting while it is Locked), and copied with the state it
// held. It reports false, changing nothing, if size passes maxSlots.
func (m *Map) rebuild(sg *Segment, size int) bool {
	if size > maxSlots {
		return false
	}
	if m.beforeRebuild != nil {
		m.beforeRebuild(sg)
	}
	old := sg.tab.Load()
	nt := &table{slots: make([]slot, size), hashed: m.hashed}
	nt.chunks.Store(new([][]byte))
	{
		pols := *sg.pols.Load()
		for i := range old.slots {
			s := &old.slots[i]
			meta := s.meta.Load()
			if meta == 0 {
				continue
			}
			v, ok := freeze(s)
			if !ok {
				continue // dead
			}
			a := chunkOf(old, meta)
			off := int(meta & offMask)
			k := keyLen(a[off:], m.hashed)
			rec := a[off : off+k+8*(pols[meta>>polShift&polMask].Len()-1)]
			var h uint64
			if m.hashed {
				h = binary.LittleEndian.Uint64(rec)
			} else {
				l, w := uvarint(rec)
				h = m.hashBytes(rec[w : w+l])
			}
			loc, dst, _ := nt.alloc(len(rec), 1<<(32-offBits)) // cannot fail: see maxChunks
			copy(dst, rec)
			nt.place(h, v, meta&^locMask|loc)
		}
	}
	sg.tab.Store(nt)
	return true
}

// freeze swaps slot s's state to Moved and returns the state it held, or
// reports false for a dead slot. It waits while the slot is Locked.
func freeze(s *slot) (rules.State, bool) {
	for {
		v := s.state.Load()
		switch v {
		case uint64(rules.Tombstone):
			return 0, false
		case uint64(Locked):
			runtime.Gosched()
			continue
		}
		if s.state.CompareAndSwap(v, uint64(Moved)) {
			return rules.State(v), true
		}
	}
}

// policy returns the index of rs in sg's policy index, adding it if need
// be, with one more key counted under it; it reports false if the index
// is full.
func (sg *Segment) policy(rs *rules.Rules) (int, bool) {
	pols := *sg.pols.Load()
	free := -1
	for i, p := range pols {
		if p == rs {
			sg.refs[i]++
			return i, true
		}
		if p == nil && free < 0 {
			free = i
		}
	}
	if free < 0 {
		if len(pols) >= int(policyLimit.Load()) {
			return 0, false
		}
		free = len(pols)
		sg.refs = append(sg.refs, 0)
	}
	next := make([]*rules.Rules, max(len(pols), free+1))
	copy(next, pols)
	next[free] = rs
	sg.setPolicies(next)
	sg.refs[free] = 1
	return free, true
}

// unref counts one key fewer under policy p, and lets go of it at none.
// A reader that still finds p in a dead slot's meta then reads nil, or a
// policy added since: its swap on the dead slot fails either way.
func (sg *Segment) unref(p int) {
	if sg.refs[p]--; sg.refs[p] > 0 {
		return
	}
	pols := *sg.pols.Load()
	next := make([]*rules.Rules, len(pols))
	copy(next, pols)
	next[p] = nil
	sg.setPolicies(next)
}

// setPolicies publishes the policy index pols, and its policy 0 on its
// own pointer (Segment.policyOf).
func (sg *Segment) setPolicies(pols []*rules.Rules) {
	sg.pol0.Store(pols[0])
	sg.pols.Store(&pols)
}

// kill counts the death of r's slot, whose state the caller has just set
// to rules.Tombstone under sg's lock.
func (sg *Segment) kill(r Ref) {
	r.t.live--
	sg.unref(int(r.meta >> polShift & polMask))
}

// Retire marks r, a live slot that Find returned under sg's lock, dead
// whatever its states, and returns them (one per window of its policy),
// so that its key can be inserted again under another policy.
func (m *Map) Retire(sg *Segment, r Ref) (s sweep.States) {
	n := r.rs.Len()
	if n == 1 {
		for {
			old := r.s.state.Load()
			if r.s.state.CompareAndSwap(old, uint64(rules.Tombstone)) {
				s[0] = rules.State(old)
				break
			}
		}
	} else {
		v, _ := r.Lock() // live under the segment's lock
		r.LoadStates(v, s[:n])
		r.s.state.Store(uint64(rules.Tombstone))
	}
	sg.kill(r)
	return s
}

// evict removes the key in slot i of t, sg's table, if every window is
// full at reading now, raising floor to the reading at which it became
// full first, and reports whether it did; sg's lock must be held. The
// check and the mark are one step that no spend can come between: a
// compare-and-swap from the very state judged full, or the slot's lock.
func (m *Map) evict(sg *Segment, t *table, i int, now time.Duration, floor *sweep.Floor) bool {
	s := &t.slots[i]
	meta := s.meta.Load()
	if meta == 0 || s.state.Load() == uint64(rules.Tombstone) {
		return false
	}
	r := Ref{s: s, t: t, meta: meta, rs: sg.policyOf(meta)}
	if r.rs.Len() == 1 {
		rule := r.rs.Rule(0)
		tick := rule.Ticks(now)
		for {
			old := r.Load()
			if old >= Moved || !rule.Full(old, tick) {
				return false
			}
			floor.Raise(rule.Reading(old)) // harmless if the swap then fails
			if r.CompareAndSwap(old, rules.Tombstone) {
				break
			}
		}
	} else {
		v, dead := r.Lock()
		if dead != 0 {
			return false
		}
		var st sweep.States
		n := r.rs.Len()
		r.LoadStates(v, st[:n])
		if !r.rs.Full(st[:n], now) {
			r.Release(v)
			return false
		}
		floor.Raise(r.rs.Reading(st[:n]))
		r.s.state.Store(uint64(rules.Tombstone))
	}
	sg.kill(r)
	return true
}

// Sample examines up to n live keys of sg, a run of slots from a random
// one, and removes those full at reading now (see evict); sg's lock must
// be held. It returns how many it removed.
func (m *Map) Sample(sg *Segment, now time.Duration, floor *sweep.Floor, n int) (removed int) {
	t := sg.tab.Load()
	if t.live == 0 || n <= 0 {
		return 0
	}
	i := rand.IntN(len(t.slots))
	for visits := len(t.slots); visits > 0 && n > 0; visits-- {
		if s := &t.slots[i]; s.meta.Load() != 0 && s.state.Load() != uint64(rules.Tombstone) {
			n--
			if m.evict(sg, t, i, now, floor) {
				removed++
			}
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
	return removed
}

// Sweep removes every key of sg full at reading now (see evict), letting
// go of sg's lock every sweepChunk keys; it stops early if the table is
// rebuilt meanwhile (the rest waits for the next sweep). It then gives
// memory back (Tidy), and returns how many keys it removed and how many
// sg holds. It takes sg's lock itself.
func (m *Map) Sweep(sg *Segment, now time.Duration, floor *sweep.Floor) (removed, left int) {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	t := sg.tab.Load()
	for i, examined := 0, 0; i < len(t.slots); i++ {
		if s := &t.slots[i]; s.meta.Load() == 0 || s.state.Load() == uint64(rules.Tombstone) {
			continue
		}
		if m.evict(sg, t, i, now, floor) {
			removed++
		}
		if examined++; examined%sweepChunk == 0 {
			sg.mu.Unlock()
			runtime.Gosched() // let a waiting writer take the lock
			sg.mu.Lock()
			if sg.tab.Load() != t {
				break
			}
		}
	}
	m.Tidy(sg)
	return removed, m.Len(sg)
}

// Tidy gives memory back once keys have gone: it replaces a table
// without live keys by an empty one, and rebuilds one whose live keys fell
// to a quarter of the most it holds (7/32 full) to 7/12 full; sg's lock
// must be held.
func (m *Map) Tidy(sg *Segment) {
	t := sg.tab.Load()
	switch {
	case t.live == 0:
		if t.used > 0 {
			sg.tab.Store(m.empty()) // every slot is dead: no swap on them can succeed
		}
	case len(t.slots) > minSlots && t.live*32 < len(t.slots)*7:
		m.rebuild(sg, sizeFor(t.live))
	}
}

// Rebuild rebuilds sg's table at its size, taking sg's lock: what a
// growth does to the keys, for a test that drives a spender across one.
func (m *Map) Rebuild(sg *Segment) {
	sg.Lock()
	defer sg.Unlock()
	m.rebuild(sg, len(sg.tab.Load().slots))
}

// Len returns the live keys of sg; sg's lock must be held.
func (m *Map) Len(sg *Segment) int { return sg.tab.Load().live }

// Bytes returns the bytes of sg's slots and arena; sg's lock must be
// held.
func (m *Map) Bytes(sg *Segment) int {
	t := sg.tab.Load()
	n := len(t.slots) * 16
	for _, c := range *t.chunks.Load() {
		n += len(c)
	}
	return n
}
