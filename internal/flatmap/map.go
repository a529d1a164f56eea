package flatmap

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/rules"
)

const (
	// minSlots is the size of a table's first slots array.
	minSlots = 8
	// maxSlots is the most slots a table grows to (16 GiB of slots).
	maxSlots = 1 << 30
	// maxArena is the most bytes an arena holds: offsets are 32 bits (and
	// an int's length, on a 32-bit platform).
	maxArena = min(math.MaxUint32, math.MaxInt)
	// maxPolicies is the most policies one map's keys can be under at
	// once: slots name them in 16 bits.
	maxPolicies = 1<<16 - 1
	// compactMin is the least dead bytes worth a compaction.
	compactMin = 1024
)

// The fields of a slot's ref word.
const (
	offBits  = 32
	polShift = 32
	polMask  = 1<<16 - 1
	tagShift = 48
	distUnit = 1 << 56 // ref>>56 is the slot's distance from home plus one
	maxDist1 = 255     // the most a distance plus one can be
)

// slot is one key: window 0's state and its ref word (see the package
// documentation); a ref of 0 is an empty slot. Its owner writes both
// words with atomic stores (set, setFirst, setRef), since Seek reads them
// without the lock; reads under the lock are plain.
type slot struct {
	first rules.State
	ref   uint64
}

// set stores e in s, a word at a time.
func (s *slot) set(e slot) {
	atomic.StoreUint64((*uint64)(&s.first), uint64(e.first))
	atomic.StoreUint64(&s.ref, e.ref)
}

// setFirst stores window 0's state in s.
func (s *slot) setFirst(v rules.State) { atomic.StoreUint64((*uint64)(&s.first), uint64(v)) }

// setRef stores s's ref word.
func (s *slot) setRef(ref uint64) { atomic.StoreUint64(&s.ref, ref) }

// newSlots returns a zeroed slots array of n slots on whole cache lines of
// its own (layout.Lines), so that the writes a store makes to one map's
// states never share a line with another map's (false sharing). A slot
// holds no pointer, so the array may be bytes underneath.
func newSlots(n int) []slot {
	b := layout.Lines(n * int(unsafe.Sizeof(slot{})))
	return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// newArena returns an arena of length n and capacity size on cache lines
// of its own (see newSlots).
func newArena(n, size int) []byte { return layout.Lines(size)[:n:size] }

// policy is an entry of the policy index: a policy and how many keys are
// under it; rs is nil where keys is 0. rs is atomic, since Seek reads it
// without the lock.
type policy struct {
	rs   atomic.Pointer[rules.Rules]
	keys int
}

// view is what Seek reads without the owner's lock: the slots, the arena
// (to its capacity) and the policy index (to its capacity) as they stand
// after the last change to any of the three arrays. It is never modified:
// a change to an array publishes a new view (publish).
type view struct {
	slots []slot
	arena []byte
	pols  []policy
}

// Map is a pointer-free table from a key to its states (see the package
// documentation). Set it up with Init; the zero Map has no seed, and
// fails on its first growth.
type Map struct {
	// ver is a sequence count: odd while a change that moves slots,
	// records or policies is under way (begin, end), bumped to even after
	// it. Seek reads it before and after, and fails if it moved.
	ver atomic.Uint64
	// view is the arrays as Seek reads them (see view).
	view atomic.Pointer[view]
	// hashed says keys are their 64-bit hashes. It, ver and view are
	// the fields Seek reads, and come first (SeekBytes).
	hashed bool
	gen    uint32 // rebuilds of slots
	slots  []slot
	arena  []byte
	pols   []policy  // the policy index
	logs   *logTable // the logs of keys under SlidingLog policies (log.go)
	n      int       // keys held
	dead   int       // bytes of dead records in arena
	seed   *Seed     // the seed of the hashes, to rehash keys (the caller's: 8 bytes here)
}

// SeekBytes is how many bytes from the start of a Map Seek reads: its
// sequence count, view and hashed flag. A caller that embeds a Map keeps
// them off any cache line it writes on every call (a lock's), so that
// Seek's reads of them hit a line every core holds.
const SeekBytes = unsafe.Offsetof(Map{}.hashed) + unsafe.Sizeof(Map{}.hashed)

// Extents returns the address ranges, [start, end), of m's slots array
// and its arena (to their capacities), the memory a store writes states
// to: for tests of layout.
func (m *Map) Extents() [2][2]uintptr {
	span := func(p unsafe.Pointer, n uintptr) [2]uintptr { return [2]uintptr{uintptr(p), uintptr(p) + n} }
	return [2][2]uintptr{
		span(unsafe.Pointer(unsafe.SliceData(m.slots)), uintptr(cap(m.slots))*unsafe.Sizeof(slot{})),
		span(unsafe.Pointer(unsafe.SliceData(m.arena)), uintptr(cap(m.arena))),
	}
}

// Init empties m and sets it up for keys hashed with seed by Seed.Hash
// (the hash a caller passes with each key), or, if hashed, for keys that
// are 64-bit hashes, passed as the hash alone. m keeps seed, which must
// not change while m is in use: a store keeps one Seed for all its maps,
// and each map holds a pointer to it rather than its 32 bytes (which
// would push a striped stripe's map past two cache lines).
func (m *Map) Init(seed *Seed, hashed bool) {
	*m = Map{hashed: hashed, seed: seed}
}

// Len returns the number of keys m holds.
func (m *Map) Len() int { return m.n }

// Slots returns the size of the slots array: indexes below it that Used
// reports are keys.
func (m *Map) Slots() int { return len(m.slots) }

// Bytes returns the bytes m's slots and arena hold.
func (m *Map) Bytes() int { return cap(m.slots)*int(unsafe.Sizeof(slot{})) + cap(m.arena) }

// Used reports whether slot i holds a key.
func (m *Map) Used(i int) bool { return m.slots[i].ref != 0 }

// Gen counts the rebuilds of m's slots (growth and Tidy): an index held
// across a change that bumped it no longer names the same key.
func (m *Map) Gen() uint32 { return m.gen }

// home returns the home slot of hash h in a table of n slots.
func home(h uint64, n int) int { return int(uint64(uint32(h)) * uint64(n) >> 32) }

// topShift brings a ref's distance plus one and tag down to its low 16
// bits (Find).
const topShift = tagShift

// probe returns what a slot's ref>>topShift is for a key of hash h at
// its home: distance plus one 1, and h's tag.
func probe(h uint64) uint64 { return 1<<8 | tag(h) }

// tag returns the 8 bits of h a slot keeps: bits the home slot does not
// come from, nor a caller's choice of lock among up to 2^24 from the
// top.
func tag(h uint64) uint64 { return h >> 32 & 0xff }

// Find returns the slot of key, whose hash is h (for hashed keys, key is
// ignored and h is the key), and reports whether m holds it.
func (m *Map) Find(key string, h uint64) (int, bool) {
	i, s := m.find(key, h, nil)
	return i, s != nil
}

// FindUnder returns the slot of key, whose hash is h, as a Hit, and
// reports whether m holds key under policy rs: Find and Rules in one
// call, with no index for the caller to check against the slots again
// (a hot path's lookup under the lock).
func (m *Map) FindUnder(key string, h uint64, rs *rules.Rules) (Hit, bool) {
	_, s := m.find(key, h, rs)
	return Hit{s}, s != nil
}

// find returns the index of key's slot and a pointer to it, or nil if m
// does not hold key (or, for a non-nil rs, holds it under another policy).
//
// A hashed key, or a key of 8 to 16 bytes, is compared with a record as
// two 8-byte words, so that the probe loop makes no call (and keeps its
// registers unspilled); other keys go to findLong. The probe compares the
// top 16 bits of each slot's ref, its distance plus one and its tag, with
// the probe's own (probe): equal is a candidate, whose record is
// compared; below is a slot nearer its home than key would be, or an
// empty one (0), where key would have been; above is another key, passed.
func (m *Map) find(key string, h uint64, rs *rules.Rules) (int, *slot) {
	head, n, lo, hi := uint(0), uint(8), h, h // a hashed key's record is its hash
	if !m.hashed {                            // a one-byte length, then the key
		if len(key) < 8 || len(key) > 16 {
			return m.findLong(key, h, rs)
		}
		head, n, lo, hi = 1, uint(len(key)), sword(key, 0), sword(key, len(key)-8)
	}
	slots, a := m.slots, m.arena
	if len(slots) == 0 {
		return 0, nil
	}
	i, p := uint(home(h, len(slots))), probe(h)
	for d := p &^ 0xff; ; i = 0 { // d is p without the tag: the probe's distance plus one, <<8
		for ; i < uint(len(slots)); i++ { // no bounds check, and no wrap but below
			ref := slots[i].ref
			if top := ref >> topShift; top == p {
				off := uint(uint32(ref))
				if off+head+n <= uint(len(a)) && (head == 0 || at(a, off) == byte(n)) &&
					word(a, off+head) == lo && word(a, off+head+n-8) == hi {
					if rs != nil && m.rulesOf(ref) != rs {
						return 0, nil
					}
					return int(i), &slots[i]
				}
			} else if top < d { // empty, or nearer its home than key would be
				return 0, nil
			}
			p, d = p+1<<8, d+1<<8
		}
	}
}

// findLong is find for a key of under 8 or over 16 bytes.
func (m *Map) findLong(key string, h uint64, rs *rules.Rules) (int, *slot) {
	slots := m.slots
	if len(slots) == 0 {
		return 0, nil
	}
	i, p := uint(home(h, len(slots))), probe(h)
	for {
		for ; i < uint(len(slots)); i++ {
			ref := slots[i].ref
			if top := ref >> topShift; top == p {
				if m.equal(uint32(ref), key) {
					if rs != nil && m.rulesOf(ref) != rs {
						return 0, nil
					}
					return int(i), &slots[i]
				}
			} else if top < p&^0xff {
				return 0, nil
			}
			p += 1 << 8
		}
		i = 0
	}
}

// at returns a[i]; the caller has checked that i < len(a).
func at(a []byte, i uint) byte { return *(*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(a)), i)) }

// word returns the 8 bytes of a from i as a little-endian word; the
// caller has checked that i+8 <= len(a). (A load through a pointer to a
// byte array, which has no alignment, with no bounds check of its own:
// one instruction on amd64 and arm64.)
func word(a []byte, i uint) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(a)), i))[:])
}

// equal reports whether the record at off, of a string key, is key's.
func (m *Map) equal(off uint32, key string) bool {
	a := m.arena[off:]
	l, w := uvarint(a)
	return l == len(key) && string(a[w:w+l]) == key
}

// uvarint decodes the key length at the start of a, and returns it and
// the bytes it took.
func uvarint(a []byte) (int, int) {
	if a[0] < 0x80 {
		return int(a[0]), 1
	}
	l, w := binary.Uvarint(a)
	return int(l), w
}

// Rules returns the policy the key in slot i is under.
func (m *Map) Rules(i int) *rules.Rules { return m.pols[m.slots[i].ref>>polShift&polMask].rs.Load() }

// First returns window 0's state of the key in slot i.
func (m *Map) First(i int) rules.State { return m.slots[i].first }

// SetFirst sets window 0's state of the key in slot i.
func (m *Map) SetFirst(i int, s rules.State) { m.slots[i].setFirst(s) }

// Load copies the states of the key in slot i into s, one per window of
// its policy (len(s) must be at most its policy's); for a key with a log,
// the log's summary as read now (rules.Rules.LogView).
func (m *Map) Load(i int, s []rules.State) {
	if len(s) == 0 {
		return
	}
	if l := m.Log(i); l != nil {
		m.Rules(i).LogView(l, s)
		return
	}
	s[0] = m.slots[i].first
	if len(s) > 1 {
		rest := m.arena[m.restAt(m.slots[i].ref):]
		for j := range s[1:] {
			s[1+j] = rules.State(binary.LittleEndian.Uint64(rest[8*j:]))
		}
	}
}

// Store sets the states of the key in slot i from s, one per window of
// its policy (len(s) must be at most its policy's).
func (m *Map) Store(i int, s []rules.State) {
	if len(s) == 0 {
		return
	}
	m.slots[i].setFirst(s[0])
	if len(s) > 1 {
		rest := m.arena[m.restAt(m.slots[i].ref):]
		for j, v := range s[1:] {
			binary.LittleEndian.PutUint64(rest[8*j:], uint64(v))
		}
	}
}

// keyLen returns the bytes of the key part of the record at off: the
// length and the key, or the hash.
func (m *Map) keyLen(off uint32) int {
	if m.hashed {
		return 8
	}
	l, w := uvarint(m.arena[off:])
	return l + w
}

// restAt returns the offset of the states of windows 1 on in the record
// that ref names.
func (m *Map) restAt(ref uint64) int {
	off := uint32(ref)
	return int(off) + m.keyLen(off)
}

// recordLen returns the bytes of the record that ref names.
func (m *Map) recordLen(ref uint64) int {
	return m.keyLen(uint32(ref)) + tailLen(m.rulesOf(ref))
}

// rulesOf returns the policy that ref names.
func (m *Map) rulesOf(ref uint64) *rules.Rules { return m.pols[ref>>polShift&polMask].rs.Load() }

// hashAt returns the hash of the key whose record is at off.
func (m *Map) hashAt(off uint32) uint64 {
	a := m.arena[off:]
	if m.hashed {
		return binary.LittleEndian.Uint64(a)
	}
	l, w := uvarint(a)
	return m.seed.Hash(unsafe.String(unsafe.SliceData(a[w:]), l))
}

// Insert adds key, whose hash is h and which m must not hold, under rs
// in states s (one per window of rs), and reports whether it could: it
// fails, changing nothing, only when the arena would pass 4 GiB, the
// policy index would pass maxPolicies policies, or the slots maxSlots.
// It may grow the slots (bumping Gen) and compact the arena.
func (m *Map) Insert(key string, h uint64, rs *rules.Rules, s []rules.State) bool {
	m.begin()
	defer m.end()
	p, ok := m.policy(rs)
	if !ok {
		return false
	}
	klen := 8
	if !m.hashed {
		klen = uvarintLen(len(key)) + len(key)
	}
	if !m.reserve(klen + tailLen(rs)) {
		m.unref(p)
		return false
	}
	if (m.n+1)*8 > len(m.slots)*7 && !m.rebuild(max(minSlots, len(m.slots)+len(m.slots)/2)) {
		m.unref(p)
		return false
	}
	off := uint64(len(m.arena))
	if m.hashed {
		m.arena = binary.LittleEndian.AppendUint64(m.arena, h)
	} else {
		m.arena = binary.AppendUvarint(m.arena, uint64(len(key)))
		m.arena = append(m.arena, key...)
	}
	for _, v := range s[1:] {
		m.arena = binary.LittleEndian.AppendUint64(m.arena, uint64(v))
	}
	if rs.IsLog() {
		m.arena = binary.LittleEndian.AppendUint32(m.arena, m.addLog(rs.NewLog(s)))
	}
	e := slot{first: s[0], ref: off | uint64(p)<<polShift | tag(h)<<tagShift}
	for !place(m.slots, e, h) {
		if !m.rebuild(len(m.slots) * 2) {
			if rs.IsLog() {
				i := binary.LittleEndian.Uint32(m.arena[len(m.arena)-4:])
				m.logs.logs[i] = nil
				m.logs.free = append(m.logs.free, i)
			}
			m.arena = m.arena[:off]
			m.unref(p)
			return false
		}
	}
	m.n++
	return true
}

// uvarintLen returns the bytes of n as a uvarint.
func uvarintLen(n int) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}

// place puts e, a slot whose ref has no distance yet, for a key of hash
// h, into slots by Robin Hood insertion: at the first slot from its home
// that is empty or nearer its own home than e would be, shifting the
// slots from there to the next empty one along by one. It reports false,
// changing nothing, if a distance would pass maxDist1, or if slots is
// full.
func place(slots []slot, e slot, h uint64) bool {
	n := len(slots)
	i, d := home(h, n), uint64(1)
	for ; slots[i].ref != 0 && slots[i].ref>>56 >= d; d++ {
		if d == maxDist1 {
			return false
		}
		if i++; i == n {
			i = 0
		}
	}
	// i is where e goes; find the empty slot that ends the run to shift.
	j := i
	for k := 0; slots[j].ref != 0; k++ {
		if slots[j].ref>>56 == maxDist1 || k == n-1 {
			return false
		}
		if j++; j == n {
			j = 0
		}
	}
	for j != i { // shift i..j-1 to i+1..j, farther from home by one
		k := j - 1
		if k < 0 {
			k = n - 1
		}
		slots[j].set(slot{slots[k].first, slots[k].ref + distUnit})
		j = k
	}
	e.ref |= d * distUnit
	slots[i].set(e)
	return true
}

// rebuild moves every key into a new slots array of size n, or larger if
// some key would sit too far from its home, and bumps Gen. It reports
// false, changing nothing, if that would take more than maxSlots.
func (m *Map) rebuild(n int) bool {
	for ; n <= maxSlots; n *= 2 {
		slots := newSlots(n)
		ok := true
		for _, e := range m.slots {
			if e.ref == 0 {
				continue
			}
			e.ref &^= maxDist1 * distUnit
			if ok = place(slots, e, m.hashAt(uint32(e.ref))); !ok {
				break
			}
		}
		if ok {
			m.slots = slots
			m.gen++
			return true
		}
	}
	return false
}

// Delete removes the key in slot i, shifting the slots after it back by
// one until one that is empty or at its home, and compacts the arena once
// its dead records pass a quarter of it.
func (m *Map) Delete(i int) {
	m.begin()
	defer m.end()
	slots := m.slots
	ref := slots[i].ref
	m.dead += m.recordLen(ref)
	m.dropLog(ref)
	m.unref(int(ref >> polShift & polMask))
	for {
		j := i + 1
		if j == len(slots) {
			j = 0
		}
		if slots[j].ref>>56 <= 1 {
			slots[i].set(slot{})
			break
		}
		slots[i].set(slot{slots[j].first, slots[j].ref - distUnit})
		i = j
	}
	m.n--
	if m.dead >= compactMin && m.dead*4 > len(m.arena) {
		m.compact(0)
	}
}

// Tidy gives memory back once keys have gone: it frees everything in an
// empty map, shrinks slots at most a quarter of the maximum load full to
// half full (bumping Gen), and reports whether it moved any slot.
func (m *Map) Tidy() bool {
	m.begin()
	defer m.end()
	if m.n == 0 && len(m.slots) > 0 {
		m.slots, m.arena, m.dead, m.logs = nil, nil, 0, nil
		m.gen++
		return true
	}
	if len(m.slots) > minSlots && m.n*32 < len(m.slots)*7 {
		return m.rebuild(max(minSlots, 2*m.n))
	}
	return false
}

// reserve makes room in the arena for need more bytes, compacting it if
// dead records make up enough of it, else growing it by an eighth (and
// need), and reports false if the arena would pass maxArena bytes.
func (m *Map) reserve(need int) bool {
	if cap(m.arena)-len(m.arena) >= need {
		return true
	}
	if m.dead >= compactMin && m.dead*8 > len(m.arena) {
		m.compact(need)
		if cap(m.arena)-len(m.arena) >= need {
			return true
		}
	}
	size := len(m.arena) + len(m.arena)/8 + need + 64
	if size > maxArena {
		size = maxArena
		if len(m.arena)+need > size {
			return false
		}
	}
	a := newArena(len(m.arena), size)
	copy(a, m.arena)
	m.arena = a
	return true
}

// compact copies the live records into a new arena with room for more
// bytes and an eighth, and points the slots at them.
func (m *Map) compact(more int) {
	live := len(m.arena) - m.dead
	a := newArena(0, min(live+live/8+more, maxArena))
	for i, e := range m.slots {
		if e.ref == 0 {
			continue
		}
		off, l := uint32(e.ref), m.recordLen(e.ref)
		m.slots[i].setRef(e.ref&^(1<<offBits-1) | uint64(len(a)))
		a = append(a, m.arena[off:int(off)+l]...)
	}
	m.arena, m.dead = a, 0
}

// SetRules moves the key in slot i to policy rs, in states s (one per
// window of rs), and reports whether it could: it fails, changing
// nothing, when the policy index or the arena is full (see Insert). A
// key whose record changes length gets a new record; a key under a
// SlidingLog policy gets a new log, seeded with s (rules.Rules.NewLog).
func (m *Map) SetRules(i int, rs *rules.Rules, s []rules.State) bool {
	ref := m.slots[i].ref
	old := int(ref >> polShift & polMask)
	if m.pols[old].rs.Load() == rs {
		m.Store(i, s)
		return true
	}
	m.begin()
	defer m.end()
	p, ok := m.policy(rs)
	if !ok {
		return false
	}
	if tailLen(m.pols[old].rs.Load()) != tailLen(rs) {
		klen := m.keyLen(uint32(ref))
		if !m.reserve(klen + tailLen(rs)) {
			m.unref(p)
			return false
		}
		ref = m.slots[i].ref // reserve may have compacted the arena
		off := uint32(ref)
		m.dead += m.recordLen(ref)
		m.dropLog(ref)
		na := uint64(len(m.arena))
		m.arena = append(m.arena, m.arena[off:int(off)+klen]...)
		m.arena = append(m.arena, make([]byte, tailLen(rs))...)
		ref = ref&^(1<<offBits-1) | na
	} else {
		m.dropLog(ref)
	}
	m.slots[i].setRef(ref&^(polMask<<polShift) | uint64(p)<<polShift)
	m.unref(old)
	if rs.IsLog() {
		binary.LittleEndian.PutUint32(m.arena[m.restAt(ref)+8*(rs.Len()-1):], m.addLog(rs.NewLog(s)))
	}
	m.Store(i, s)
	if m.dead >= compactMin && m.dead*4 > len(m.arena) {
		m.compact(0)
	}
	return true
}

// policy returns the index of rs in the policy index, adding it if need
// be, with one more key counted under it; it reports false if the index
// is full.
func (m *Map) policy(rs *rules.Rules) (int, bool) {
	free := -1
	for i := range m.pols {
		p := &m.pols[i]
		r := p.rs.Load()
		if r == rs {
			p.keys++
			return i, true
		}
		if r == nil && free < 0 {
			free = i
		}
	}
	if free < 0 {
		if len(m.pols) == maxPolicies {
			return 0, false
		}
		free = len(m.pols)
		m.pols = append(m.pols, policy{})
	}
	m.pols[free].rs.Store(rs)
	m.pols[free].keys = 1
	return free, true
}

// unref counts one key fewer under policy p, and lets go of it at none.
func (m *Map) unref(p int) {
	if m.pols[p].keys--; m.pols[p].keys == 0 {
		m.pols[p].rs.Store(nil)
	}
}
