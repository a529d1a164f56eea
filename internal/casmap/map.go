package casmap

import (
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// The sentinels of the state word below sweep.Fresh (see the package
// documentation). Every state at or above Moved is a sentinel.
const (
	// Locked is the state of a slot of several windows while a caller
	// holds it.
	Locked = sweep.Fresh - 1
	// Moved is the state of a slot a rebuild copied into a new table.
	Moved = sweep.Fresh - 2
)

// The fields of a slot's meta word.
const (
	polShift = 32
	polMask  = 1<<16 - 1
	tagShift = 48
	usedBit  = 1 << 56
	tagMask  = 0x1ff << tagShift // the tag and the used bit
	// maxPolicies is the most policies one segment's keys can be under
	// at once: metas name them in 16 bits.
	maxPolicies = polMask
)

// slot is one key: window 0's state and its meta (see the package
// documentation).
type slot struct {
	state atomic.Uint64
	meta  atomic.Uint64
}

// Map is the table: its segments, and the seed of the hash of every key.
// Set it up with Init. Lookups (Find) and the state words are safe for
// concurrent use without a lock; everything that changes a table takes
// its segment's lock (Segment.Lock).
type Map struct {
	segs   []Segment
	shift  uint // 64 - log2(len(segs)): h>>shift is h's segment
	seed   maphash.Seed
	hashed bool
}

// segData is one segment's lock, table and policy index.
type segData struct {
	mu   sync.Mutex
	tab  atomic.Pointer[table]
	pols atomic.Pointer[[]*rules.Rules] // the policy index, copy-on-write
	refs []int                          // keys under each policy; guarded by mu
}

// Segment is a segData padded to a whole number of cache lines, so that
// two segments' locks and table pointers never share one (asserted by a
// test).
type Segment struct {
	// The padding goes first: a zero-size last field would be given
	// padding of its own (so that its address stays inside the struct).
	_ [(layout.CacheLine - unsafe.Sizeof(segData{})%layout.CacheLine) % layout.CacheLine]byte
	segData
}

// Init empties m and sets it up with segments segments (a power of two),
// for string keys or, if hashed, for keys kept as their 64-bit hash.
func (m *Map) Init(segments int, hashed bool) {
	*m = Map{segs: make([]Segment, segments), shift: 64, seed: maphash.MakeSeed(), hashed: hashed}
	for n := segments; n > 1; n >>= 1 {
		m.shift--
	}
	for i := range m.segs {
		m.segs[i].pols.Store(new([]*rules.Rules))
	}
}

// Hash returns the hash of key, which picks its segment and slot.
func (m *Map) Hash(key string) uint64 { return maphash.String(m.seed, key) }

// Segment returns the segment of hash h.
func (m *Map) Segment(h uint64) *Segment { return &m.segs[h>>m.shift] }

// Index returns the index of the segment of hash h.
func (m *Map) Index(h uint64) int { return int(h >> m.shift) }

// Segments returns the number of segments.
func (m *Map) Segments() int { return len(m.segs) }

// At returns segment i.
func (m *Map) At(i int) *Segment { return &m.segs[i] }

// Lock takes the segment's lock, which every change to its table takes.
func (sg *Segment) Lock() { sg.mu.Lock() }

// Unlock lets go of the segment's lock.
func (sg *Segment) Unlock() { sg.mu.Unlock() }

// Wait waits for a rebuild of the segment in flight, if any: a caller that
// found a slot Moved calls it, then looks its key up again.
func (sg *Segment) Wait() {
	sg.mu.Lock()
	sg.mu.Unlock() //nolint:staticcheck // an empty critical section: waiting for the holder is the point
}

// Ref is a key's slot as Find returned it: its state word, and its policy.
// The zero Ref is a missing key.
type Ref struct {
	s    *slot
	t    *table
	meta uint64
	rs   *rules.Rules
}

// Found reports whether r names a slot.
func (r Ref) Found() bool { return r.s != nil }

// Rules returns the policy of r's key (nil for a missing key). It is the
// slot's policy for as long as the slot is live.
func (r Ref) Rules() *rules.Rules { return r.rs }

// Load returns r's state word.
func (r Ref) Load() rules.State { return rules.State(r.s.state.Load()) }

// CompareAndSwap swaps r's state word from old to next if it holds old.
func (r Ref) CompareAndSwap(old, next rules.State) bool {
	return r.s.state.CompareAndSwap(uint64(old), uint64(next))
}

// Find returns key's live slot in sg, whose hash is h (for hashed keys,
// key is ignored: h is the key), or the zero Ref. It takes no lock. The
// slot may die (rules.Tombstone) or move (Moved) as soon as Find returns:
// its state word says so.
//
// A hashed key, or a key of 8 to 16 bytes, is compared with a record as
// two 8-byte words; other keys go to equalLong.
func (m *Map) Find(sg *Segment, key string, h uint64) Ref {
	t := sg.tab.Load()
	if t == nil {
		return Ref{}
	}
	head, n, lo, hi := uint(0), uint(8), h, h // a hashed key's record is its hash
	long := false
	if !m.hashed { // a one-byte length, then the key
		if len(key) < 8 || len(key) > 16 {
			long = true
		} else {
			head, n, lo, hi = 1, uint(len(key)), load64(key, 0), load64(key, len(key)-8)
		}
	}
	slots := t.slots
	i, want := home(h, len(slots)), tag(h)
	for range slots {
		s := &slots[i]
		meta := s.meta.Load()
		if meta == 0 {
			return Ref{}
		}
		if meta&tagMask == want {
			a := chunkOf(t, meta)
			off := uint(meta & offMask)
			var eq bool
			if long {
				eq = equalLong(a[off:], key)
			} else {
				eq = off+head+n <= uint(len(a)) && (head == 0 || a[off] == byte(n)) &&
					word(a, off+head) == lo && word(a, off+head+n-8) == hi
			}
			if eq && s.state.Load() != uint64(rules.Tombstone) {
				return Ref{s: s, t: t, meta: meta, rs: (*sg.pols.Load())[meta>>polShift&polMask]}
			}
		}
		if i++; i == len(slots) {
			i = 0
		}
	}
	return Ref{}
}

// home returns the home slot of hash h in a table of n slots.
func home(h uint64, n int) int { return int(uint64(uint32(h)) * uint64(n) >> 32) }

// tag returns the tag bits of h as they sit in a meta word, with the used
// bit: bits the home slot does not come from, nor the segment (there are
// at most 2^24 segments).
func tag(h uint64) uint64 { return (h>>32&0xff | 0x100) << tagShift }

// word returns the 8 bytes of a from i as a little-endian word; the
// caller has checked that i+8 <= len(a).
func word(a []byte, i uint) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(a)), i))[:])
}

// load64 returns the 8 bytes of s from i as a little-endian word.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// equalLong reports whether the record at the start of a is key's.
func equalLong(a []byte, key string) bool {
	l, w := uvarint(a)
	return w > 0 && l == len(key) && len(a) >= w+l && string(a[w:w+l]) == key
}

// uvarint decodes the key length at the start of a, and returns it and
// the bytes it took (0 if a holds none).
func uvarint(a []byte) (int, int) {
	if len(a) > 0 && a[0] < 0x80 {
		return int(a[0]), 1
	}
	l, w := binary.Uvarint(a)
	if w <= 0 {
		return 0, 0
	}
	return int(l), w
}

// uvarintLen returns the bytes of n as a uvarint.
func uvarintLen(n int) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}

// Lock takes the lock of r, a slot of several windows, swapping Locked in,
// and returns window 0's state; it reports rules.Tombstone or Moved, and
// takes nothing, if the slot is dead or moved.
func (r Ref) Lock() (v, sentinel rules.State) {
	for {
		old := r.s.state.Load()
		switch old {
		case uint64(rules.Tombstone), uint64(Moved):
			return 0, rules.State(old)
		case uint64(Locked):
			runtime.Gosched() // held for a few loads and stores
			continue
		}
		if r.s.state.CompareAndSwap(old, uint64(Locked)) {
			return rules.State(old), 0
		}
	}
}

// LoadStates copies the states of r, locked with window 0's state v,
// into s, one per window of its policy.
func (r Ref) LoadStates(v rules.State, s []rules.State) {
	s[0] = v
	if len(s) > 1 {
		rest := r.rest(len(s))
		for j := range s[1:] {
			s[1+j] = rules.State(binary.LittleEndian.Uint64(rest[8*j:]))
		}
	}
}

// Unlock stores the states s into r, locked, and lets go of its lock.
func (r Ref) Unlock(s []rules.State) {
	if len(s) > 1 {
		rest := r.rest(len(s))
		for j, v := range s[1:] {
			binary.LittleEndian.PutUint64(rest[8*j:], uint64(v))
		}
	}
	r.s.state.Store(uint64(s[0]))
}

// Release lets go of r's lock, leaving its states as they were, window
// 0's being v.
func (r Ref) Release(v rules.State) { r.s.state.Store(uint64(v)) }

// rest returns the bytes of the states of windows 1 to n-1 of r's record.
func (r Ref) rest(n int) []byte {
	a := chunkOf(r.t, r.meta)
	off := int(r.meta & offMask)
	k := keyLen(a[off:], r.t.hashed)
	return a[off+k : off+k+8*(n-1)]
}

// keyLen returns the bytes of the key part of the record at the start of
// a: the length and the key, or the hash.
func keyLen(a []byte, hashed bool) int {
	if hashed {
		return 8
	}
	l, w := uvarint(a)
	return l + w
}
