package casmap

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/keyrate/keyrate/internal/flatmap"
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

// policyLimit is the most policies one segment's keys can be under at
// once: maxPolicies, or less in a test (SetPolicyLimit).
var policyLimit atomic.Int64

func init() { policyLimit.Store(maxPolicies) }

// SetPolicyLimit lowers the most policies one segment's keys can be under
// at once to n (at most maxPolicies), so that a test can fill a segment's
// policy index with a few keys instead of 65535, and returns the function
// that restores it. For tests only: it applies to every Map.
func SetPolicyLimit(n int) (restore func()) {
	old := policyLimit.Swap(int64(min(max(n, 1), maxPolicies)))
	return func() { policyLimit.Store(old) }
}

// Slot is one key: window 0's state and its meta (see the package
// documentation). Its state word is what a spender compare-and-swaps.
type Slot struct {
	state atomic.Uint64
	meta  atomic.Uint64
}

// slot is Slot within the package.
type slot = Slot

// Load returns s's state word.
func (s *Slot) Load() rules.State { return rules.State(s.state.Load()) }

// CompareAndSwap swaps s's state word from old to next if it holds old.
func (s *Slot) CompareAndSwap(old, next rules.State) bool {
	return s.state.CompareAndSwap(uint64(old), uint64(next))
}

// Map is the table: its segments, and the seed of the hash of every key.
// Set it up with Init. Lookups (Find) and the state words are safe for
// concurrent use without a lock; everything that changes a table takes
// its segment's lock (Segment.Lock).
type Map struct {
	segs   []Segment
	mask   uint64       // len(segs) - 1: h>>segShift&mask is h's segment
	seed   flatmap.Seed // the secret of the keys' hashes, shared with no other store
	hashed bool
	// beforeRebuild, if set (OnRebuild), runs under a segment's lock
	// before its table is rebuilt.
	beforeRebuild func(sg *Segment)
}

// OnRebuild makes f run before every rebuild of a segment's table (a
// growth, a tidy or Rebuild), under the segment's lock, while its slots
// are still live: a store gives back there what was charged to slots
// that are about to move (atomicbucket's hot keys). f must not take the
// segment's lock. Call it after Init, before m is shared.
func (m *Map) OnRebuild(f func(sg *Segment)) { m.beforeRebuild = f }

// segShift is where the bits of a hash that pick its segment start: above
// the home slot's 32 bits and the tag's 8.
const segShift = 40

// segData is one segment's lock, table and policy index.
type segData struct {
	mu   sync.Mutex
	tab  atomic.Pointer[table]
	pols atomic.Pointer[[]*rules.Rules] // the policy index, copy-on-write
	pol0 atomic.Pointer[rules.Rules]    // (*pols)[0], or nil: stored with pols
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
	*m = Map{segs: make([]Segment, segments), mask: uint64(segments - 1), seed: flatmap.MakeSeed(), hashed: hashed}
	for i := range m.segs {
		m.segs[i].pols.Store(new([]*rules.Rules))
		m.segs[i].tab.Store(m.empty())
	}
}

// Hash returns the hash of key, which picks its segment and slot: the
// keyed wyhash the striped store's tables use too (flatmap.Seed.Hash),
// under a seed drawn at random per Map, so keys crafted to collide in one
// process do not in another.
func (m *Map) Hash(key string) uint64 { return m.seed.Hash(key) }

// hashBytes is Hash of the key bytes b.
func (m *Map) hashBytes(b []byte) uint64 {
	if len(b) == 0 {
		return m.Hash("")
	}
	return m.Hash(unsafe.String(&b[0], len(b)))
}

// Segment returns the segment of hash h.
func (m *Map) Segment(h uint64) *Segment { return &m.segs[h>>segShift&m.mask] }

// Index returns the index of the segment of hash h.
func (m *Map) Index(h uint64) int { return int(h >> segShift & m.mask) }

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
func (r Ref) Load() rules.State { return r.s.Load() }

// CompareAndSwap swaps r's state word from old to next if it holds old.
func (r Ref) CompareAndSwap(old, next rules.State) bool { return r.s.CompareAndSwap(old, next) }

// Lookup is the hot path's Hash and Find for a key of 8 to 16 bytes
// (Short): key's hash, and its live slot and policy, or nil and nil. It
// hashes the key inline (flatmap.Seed.Short) and compares its first and
// last 8 bytes with a record's (a hashed key's record is its hash), in a
// loop that makes no call and keeps its values in registers; the caller
// sends other keys to Hash and LookupLong. A loop ends at an empty slot,
// which every table has (it is at most 7/8 full). The segment and the
// slots are addressed without bounds checks: the segment's index is
// masked to the power-of-two count, and the probe pointer wraps from the
// last slot to the first (never pointing past the slots, which the race
// detector's checkptr would refuse).
func (m *Map) Lookup(key string) (*Slot, *rules.Rules, uint64) {
	n := uint(len(key))
	lo, hi := load64(key, 0), load64(key, len(key)-8) // a one-byte length, then the key
	h, _ := m.seed.Short(key)
	sg := (*Segment)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.segs)), uintptr(h>>segShift&m.mask)*unsafe.Sizeof(Segment{})))
	t := sg.tab.Load()
	first := unsafe.Pointer(unsafe.SliceData(t.slots))
	last := unsafe.Add(first, uintptr(len(t.slots)-1)*unsafe.Sizeof(Slot{}))
	s := (*Slot)(unsafe.Add(first, uintptr(home(h, len(t.slots)))*unsafe.Sizeof(Slot{})))
	want := tag(h) >> tagShift // the tag and the used bit: the top bits of a meta
	if m.hashed {              // a hashed key's record is its hash
		for {
			meta := s.meta.Load()
			if meta == 0 {
				return nil, nil, h
			}
			if meta>>tagShift == want {
				a, off := chunkOf(t, meta), uint(meta&offMask)
				if off+8 <= uint(len(a)) && word(a, off) == h && s.state.Load() != uint64(rules.Tombstone) {
					return s, sg.policyOf(meta), h
				}
			}
			if unsafe.Pointer(s) == last {
				s = (*Slot)(first)
			} else {
				s = (*Slot)(unsafe.Add(unsafe.Pointer(s), unsafe.Sizeof(Slot{})))
			}
		}
	}
	for {
		meta := s.meta.Load()
		if meta == 0 {
			return nil, nil, h
		}
		if meta>>tagShift == want {
			a, off := chunkOf(t, meta), uint(meta&offMask)
			if off+1+n <= uint(len(a)) && a[off] == byte(n) && word(a, off+1) == lo && word(a, off+n-7) == hi &&
				s.state.Load() != uint64(rules.Tombstone) {
				return s, sg.policyOf(meta), h
			}
		}
		if unsafe.Pointer(s) == last {
			s = (*Slot)(first)
		} else {
			s = (*Slot)(unsafe.Add(unsafe.Pointer(s), unsafe.Sizeof(Slot{})))
		}
	}
}

// policyOf returns the policy that meta names, loaded after meta. Policy
// 0, the commonest by far, is read from its own pointer.
func (sg *Segment) policyOf(meta uint64) *rules.Rules {
	if p := meta >> polShift & polMask; p != 0 {
		return (*sg.pols.Load())[p]
	}
	return sg.pol0.Load()
}

// Short reports whether Lookup takes key: whether it has 8 to 16 bytes.
func Short(key string) bool { return uint(len(key))-8 <= 8 }

// LookupLong is Lookup for a key that is not Short.
func (m *Map) LookupLong(key string, h uint64) (*Slot, *rules.Rules) {
	sg := m.Segment(h)
	r := m.Find(sg, key, h)
	return r.s, r.rs
}

// Find returns key's live slot in sg, whose hash is h (for hashed keys,
// key is ignored: h is the key), or the zero Ref. It takes no lock. The
// slot may die (rules.Tombstone) or move (Moved) as soon as Find returns:
// its state word says so.
func (m *Map) Find(sg *Segment, key string, h uint64) Ref {
	t := sg.tab.Load()
	s, meta := m.probe(t, key, h)
	if s == nil {
		return Ref{}
	}
	return Ref{s: s, t: t, meta: meta, rs: sg.policyOf(meta)}
}

// probe returns key's live slot in t and its meta, or nil. A hashed key,
// or a key of 8 to 16 bytes, is compared with a record as two 8-byte
// words, so that the probe loop makes no call; other keys go to
// probeLong. The loop ends at an empty slot, which every table has (it is
// at most 7/8 full).
func (m *Map) probe(t *table, key string, h uint64) (*Slot, uint64) {
	head, n, lo, hi := uint(0), uint(8), h, h // a hashed key's record is its hash
	if !m.hashed {                            // a one-byte length, then the key
		if len(key) < 8 || len(key) > 16 {
			return probeLong(t, key, h)
		}
		head, n, lo, hi = 1, uint(len(key)), load64(key, 0), load64(key, len(key)-8)
	}
	slots := t.slots
	i, want := home(h, len(slots)), tag(h)
	for {
		s := &slots[i]
		meta := s.meta.Load()
		if meta == 0 {
			return nil, 0
		}
		if meta&tagMask == want {
			a := chunkOf(t, meta)
			off := uint(meta & offMask)
			if off+head+n <= uint(len(a)) && (head == 0 || a[off] == byte(n)) &&
				word(a, off+head) == lo && word(a, off+head+n-8) == hi &&
				s.state.Load() != uint64(rules.Tombstone) {
				return s, meta
			}
		}
		if i++; i == len(slots) {
			i = 0
		}
	}
}

// probeLong is probe for a string key of under 8 or over 16 bytes.
func probeLong(t *table, key string, h uint64) (*Slot, uint64) {
	slots := t.slots
	i, want := home(h, len(slots)), tag(h)
	for {
		s := &slots[i]
		meta := s.meta.Load()
		if meta == 0 {
			return nil, 0
		}
		if meta&tagMask == want && equalLong(chunkOf(t, meta)[meta&offMask:], key) &&
			s.state.Load() != uint64(rules.Tombstone) {
			return s, meta
		}
		if i++; i == len(slots) {
			i = 0
		}
	}
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

// load64 returns the 8 bytes of s from i as a little-endian word; the
// caller has checked that i+8 <= len(s). (One load, as word.)
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))[:])
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

// lockSpins is how many times Lock reads a slot that another caller holds
// before it yields its processor (runtime.Gosched): a holder keeps the
// slot for a few dozen instructions, which a spin of reads (shared, so
// that they do not slow the holder's writes) usually outlasts on a machine
// with a core to spare; on one without, the holder may be descheduled,
// and the spinner yields to let it run.
const lockSpins = 64

// Lock takes the lock of r, a slot of several windows, swapping Locked in,
// and returns window 0's state; it reports rules.Tombstone or Moved, and
// takes nothing, if the slot is dead or moved.
func (r Ref) Lock() (v, sentinel rules.State) { return r.s.Lock() }

// Lock takes the lock of s, a slot of several windows, as Ref.Lock does.
// A caller with the state it expects may try one compare-and-swap to
// Locked first, and call Lock if that fails.
func (s *Slot) Lock() (v, sentinel rules.State) {
	for spins := 0; ; {
		old := s.state.Load()
		switch old {
		case uint64(rules.Tombstone), uint64(Moved):
			return 0, rules.State(old)
		case uint64(Locked):
			if spins++; spins > lockSpins {
				spins = 0
				runtime.Gosched()
			}
			continue
		}
		if s.state.CompareAndSwap(old, uint64(Locked)) {
			return rules.State(old), 0
		}
	}
}

// Release lets go of the lock of s, storing window 0's state v.
func (s *Slot) Release(v rules.State) { s.state.Store(uint64(v)) }

// LoadStates copies the states of r, locked with window 0's state v,
// into s, one per window of its policy.
func (r Ref) LoadStates(v rules.State, s []rules.State) {
	s[0] = v
	if len(s) > 1 {
		loadRest(r.rest(len(s)), s[1:])
	}
}

// Unlock stores the states s into r, locked, and lets go of its lock.
func (r Ref) Unlock(s []rules.State) {
	if len(s) > 1 {
		storeRest(r.rest(len(s)), s[1:])
	}
	r.s.state.Store(uint64(s[0]))
}

// Release lets go of r's lock, leaving its states as they were, window
// 0's being v.
func (r Ref) Release(v rules.State) { r.s.state.Store(uint64(v)) }

// Held is a slot of several windows whose lock its caller holds (Hold),
// with the bytes of its other windows' states, found once for the load and
// the store.
type Held struct {
	s    *slot
	rest []byte
}

// Hold is Lock and LoadStates in one: it takes the lock of r, a slot of
// several windows, and copies its states into s, one per window of its
// policy. It reports rules.Tombstone or Moved, and takes nothing, if the
// slot is dead or moved.
func (r Ref) Hold(s []rules.State) (Held, rules.State) {
	v, sentinel := r.Lock()
	if sentinel != 0 {
		return Held{}, sentinel
	}
	h := Held{s: r.s, rest: r.rest(len(s))}
	s[0] = v
	loadRest(h.rest, s[1:])
	return h, 0
}

// HoldSlot is Hold for a slot of several windows that Lookup or
// LookupLong returned for a key of hash h, which names no table: the
// slot's table is read once its lock is held, when it is the segment's
// current table (a rebuild publishes a new table only after swapping
// every live slot of the old one to Moved, which waits while a slot is
// Locked). It saves the hot path Find's second probe, and the decoding of
// the record's key length.
func (m *Map) HoldSlot(slot *Slot, key string, h uint64, s []rules.State) (Held, rules.State) {
	v := rules.State(slot.state.Load())
	if v >= Moved || !slot.state.CompareAndSwap(uint64(v), uint64(Locked)) { // held, or a sentinel: Lock's loop
		var sentinel rules.State
		if v, sentinel = (Ref{s: slot}).Lock(); sentinel != 0 {
			return Held{}, sentinel
		}
	}
	// The record's key part is key's: its length and bytes, or its hash.
	k := 8
	if !m.hashed {
		k = uvarintLen(len(key)) + len(key)
	}
	t, meta := m.Segment(h).tab.Load(), slot.meta.Load()
	a, off := chunkOf(t, meta), int(meta&offMask)+k
	held := Held{s: slot, rest: a[off : off+8*(len(s)-1)]}
	s[0] = v
	loadRest(held.rest, s[1:])
	return held, 0
}

// Rest is the states of windows 1 on of a slot of several windows, in its
// record: 8 bytes each, little-endian, which only the holder of the
// slot's lock reads or writes.
type Rest struct{ p unsafe.Pointer } // window 1's state

// Load returns the state of window i (at least 1, and below the slot's
// policy's windows).
func (r Rest) Load(i int) rules.State {
	return rules.State(binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(r.p, 8*(i-1)))[:]))
}

// Store writes v as the state of window i (as in Load).
func (r Rest) Store(i int, v rules.State) {
	binary.LittleEndian.PutUint64((*[8]byte)(unsafe.Add(r.p, 8*(i-1)))[:], uint64(v))
}

// Rest returns the states of windows 1 on of slot, a slot of several
// windows that Lookup or LookupLong returned for key, of hash h: as
// HoldSlot finds them, in the segment's current table, which is the
// slot's while its lock is held. It may be called just before the lock
// is taken, from a live state the caller loaded: if that compare-and-swap
// to Locked succeeds, the table Rest read was the slot's, as the slot was
// not Moved, and a rebuild publishes a new table only after swapping every
// live slot of the old one to Moved; if it fails, the caller must call
// Rest again once it holds the lock. The states may be read and written
// only while the lock is held. The record was allocated with a state for
// every window of the slot's policy (Prepare), so Rest checks no bounds.
func (m *Map) Rest(slot *Slot, key string, h uint64) Rest {
	k := 8 // the record's key part: the key's hash, or its length and bytes
	if !m.hashed {
		k = uvarintLen(len(key)) + len(key)
	}
	t, meta := m.Segment(h).tab.Load(), slot.meta.Load()
	a := chunkOf(t, meta)
	return Rest{p: unsafe.Add(unsafe.Pointer(unsafe.SliceData(a)), int(meta&offMask)+k)}
}

// Unlock stores the states s into h's slot and lets go of its lock.
func (h Held) Unlock(s []rules.State) {
	storeRest(h.rest, s[1:])
	h.s.state.Store(uint64(s[0]))
}

// Release lets go of h's lock, leaving its states as they were, window
// 0's being v: what a denied request writes.
func (h Held) Release(v rules.State) { h.s.state.Store(uint64(v)) }

// loadRest copies the states of windows 1 on, 8 bytes each in rest, into s.
func loadRest(rest []byte, s []rules.State) {
	for j := range s {
		s[j] = rules.State(binary.LittleEndian.Uint64(rest[8*j:]))
	}
}

// storeRest writes the states s of windows 1 on into rest, 8 bytes each.
func storeRest(rest []byte, s []rules.State) {
	for j, v := range s {
		binary.LittleEndian.PutUint64(rest[8*j:], uint64(v))
	}
}

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

// Slot returns r's slot.
func (r Ref) Slot() *Slot { return r.s }
