package flatmap

import (
	"sync/atomic"
	"unsafe"

	"github.com/keyrate/keyrate/internal/rules"
)

// This file is the part of Map that a caller may read without the
// owner's lock: Seek, a Find that also reads window 0's state and the
// key's policy, under a sequence count (a seqlock). See the package
// documentation's section on reading without the lock.

// testSeekPause, set only by tests, holds a Seek that has found its
// key's slot, before it reads the slot's state and policy (the point at
// which a change by the lock's owner would make the slot another key's),
// until the test clears it; the Seek sets testSeekPaused once there. A
// flag rather than a hook function, so that Seek makes no call.
var testSeekPause, testSeekPaused atomic.Int32

// begin marks the start of a change that moves slots, records or
// policies (Insert, Delete, SetRules, Tidy): the sequence count turns
// odd, and a Seek that overlaps the change fails.
func (m *Map) begin() { m.ver.Add(1) }

// end publishes the arrays as they now stand (publish) and turns the
// sequence count even again.
func (m *Map) end() {
	m.publish()
	m.ver.Add(1)
}

// publish stores a new view if any of the three arrays has been
// reallocated since the last one: appends within capacity need none, since
// the view spans each array to its capacity.
func (m *Map) publish() {
	if v := m.view.Load(); v != nil &&
		unsafe.SliceData(v.slots) == unsafe.SliceData(m.slots) && len(v.slots) == len(m.slots) &&
		unsafe.SliceData(v.arena) == unsafe.SliceData(m.arena) && len(v.arena) == cap(m.arena) &&
		unsafe.SliceData(v.pols) == unsafe.SliceData(m.pols) && len(v.pols) == cap(m.pols) {
		return
	}
	m.view.Store(&view{slots: m.slots, arena: m.arena[:cap(m.arena)], pols: m.pols[:cap(m.pols)]})
}

// A Hit is the slot of a key that Seek found, or At names. Its owner may
// use it under the lock while Version returns the count Seek was given
// (At's, until the next Insert, Delete, SetRules or Tidy): the slot then
// still holds the same key under the same policy.
type Hit struct{ s *slot }

// At returns the Hit of slot i, an index from Find.
func (m *Map) At(i int) Hit { return Hit{&m.slots[i]} }

// First returns window 0's state of the key in h's slot, under the lock.
func (h Hit) First() rules.State { return h.s.first }

// SetFirst sets window 0's state of the key in h's slot, under the lock.
func (h Hit) SetFirst(v rules.State) { h.s.setFirst(v) }

// Version returns m's sequence count, for its owner, which holds the
// lock: a Seek that returned the same count found a slot that still holds
// the same key under the same policy (only its states may have changed).
func (m *Map) Version() uint64 { return m.ver.Load() }

// Seek is Find for a caller that does not hold the owner's lock, for a
// key of 8 to 16 bytes or a hashed key (SeekLong takes any key), and a
// key under policy rs: it returns the slot of key (a Hit), whose hash is
// h, and window 0's state there, and reports true only if m held key under rs at
// sequence count ver (Version, read before the call) throughout the
// reading. It reports false if m does not hold key under rs, or a change
// that moves slots, records or policies was under way at ver or ran since
// (the caller then takes the lock, and, if Version still returns ver,
// may use the slot as found; else it calls Find).
//
// The state is one atomic load of the word the owner stores with an
// atomic store, so it is the key's state at that instant under rs: changes
// to states alone (SetFirst, Store) leave the count as it is.
//
// Every word Seek reads is atomic (the count, the view, a slot's words, a
// policy) or a byte of a key's record in an arena. A record's key is
// written once, before the ref that names it is stored, and never again
// in that array (compaction and growth write new arrays, and appends go
// past every published record), and an arena is written no more once
// another replaces it; Seek reads records through refs it loaded, so every
// byte it reads was written before the store it loaded, or belongs to an
// arena that no writer touches any more: the race detector sees no race,
// and the count, read last, says whether what it read is consistent.
func (m *Map) Seek(key string, h uint64, rs *rules.Rules, ver uint64) (Hit, rules.State, bool) {
	w := m.view.Load()
	if ver&1 != 0 || w == nil {
		return Hit{}, 0, false
	}
	head, n, lo, hi := uint(0), uint(8), h, h // a hashed key's record is its hash
	if !m.hashed {                            // a one-byte length, then the key
		if len(key) < 8 || len(key) > 16 {
			return Hit{}, 0, false // SeekLong's
		}
		head, n, lo, hi = 1, uint(len(key)), sword(key, 0), sword(key, len(key)-8)
	}
	slots, a := w.slots, w.arena
	if len(slots) == 0 {
		return Hit{}, 0, false
	}
	i, p := uint(home(h, len(slots))), probe(h)
	var ref uint64
	for ; ; i = 0 { // as in Find
		for ; i < uint(len(slots)); i++ {
			ref = atomic.LoadUint64(&slots[i].ref)
			if top := ref >> topShift; top == p {
				off := uint(uint32(ref))
				if off+head+n <= uint(len(a)) && (head == 0 || at(a, off) == byte(n)) &&
					word(a, off+head) == lo && word(a, off+head+n-8) == hi {
					goto found
				}
			} else if top < p&^0xff { // empty, or nearer its home than key would be
				return Hit{}, 0, false
			}
			p += 1 << 8
		}
	}
found:
	// The key's policy and state, and the count again. (Here, not in a
	// function of its own, so that Seek makes no call and needs no stack
	// frame; SeekLong ends alike.) A view loaded again is the one the slot
	// was found in, unless the count has moved.
	for testSeekPause.Load() != 0 { // tests only: see pauseSeek
		testSeekPaused.Store(1)
	}
	w = m.view.Load()
	if q := uint(ref >> polShift & polMask); q >= uint(len(w.pols)) || w.pols[q].rs.Load() != rs {
		return Hit{}, 0, false
	}
	first := rules.State(atomic.LoadUint64((*uint64)(&slots[i].first)))
	return Hit{&slots[i]}, first, m.ver.Load() == ver
}

// SeekLong is Seek for any key: Seek's own case, a key of 8 to 16 bytes
// or a hashed key, or a key of under 8 or over 16 bytes, which Seek
// reports missing. (Seek leaves those out so that it makes no call, and
// needs no stack frame of its own.)
func (m *Map) SeekLong(key string, h uint64, rs *rules.Rules, ver uint64) (Hit, rules.State, bool) {
	if m.hashed || len(key) >= 8 && len(key) <= 16 {
		return m.Seek(key, h, rs, ver)
	}
	w := m.view.Load()
	if ver&1 != 0 || w == nil || len(w.slots) == 0 {
		return Hit{}, 0, false
	}
	slots, a := w.slots, w.arena
	i, p := uint(home(h, len(slots))), probe(h)
	for {
		for ; i < uint(len(slots)); i++ {
			ref := atomic.LoadUint64(&slots[i].ref)
			if top := ref >> topShift; top == p {
				if equalAt(a, uint(uint32(ref)), key) {
					for testSeekPause.Load() != 0 { // tests only: see pauseSeek
						testSeekPaused.Store(1)
					}
					q := uint(ref >> polShift & polMask)
					if q >= uint(len(w.pols)) || w.pols[q].rs.Load() != rs {
						return Hit{}, 0, false
					}
					first := rules.State(atomic.LoadUint64((*uint64)(&slots[i].first)))
					return Hit{&slots[i]}, first, m.ver.Load() == ver
				}
			} else if top < p&^0xff {
				return Hit{}, 0, false
			}
			p += 1 << 8
		}
		i = 0
	}
}

// equalAt reports whether the record at off of arena a, of a string key,
// is key's, reading no byte past the record's key.
func equalAt(a []byte, off uint, key string) bool {
	if off >= uint(len(a)) {
		return false
	}
	l, w := uvarint(a[off:])
	return l == len(key) && off+uint(w+l) <= uint(len(a)) && string(a[off+uint(w):off+uint(w+l)]) == key
}
