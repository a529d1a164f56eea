// Package flatmap is a pointer-free hash table from a key to its packed
// keyrate states, for a store that guards each table with a lock of its
// own (the striped store's stripes). The garbage collector never scans
// it: a million keys cost it no more marking than an empty store.
//
// # Layout
//
// A Map is three arrays:
//
//   - slots, an open-addressing table of 16-byte slots: window 0's state
//     inline, and one word holding the offset of the key's record in the
//     arena (32 bits), the index of its policy in the policy index (16
//     bits), 8 bits of the key's hash (a tag that rejects most other keys
//     without reading the arena) and the slot's distance from its home
//     slot plus one (8 bits; 0 marks an empty slot).
//   - arena, an append-only []byte of records: the key's length as a
//     uvarint and its bytes (or, for hashed keys, the 64-bit hash alone),
//     followed by the states of the key's other windows, 8 bytes each
//     (keyrate.MaxLimits-1 at most). A record's size follows from its
//     policy, so a key moved to a policy of another window count gets a
//     new record and its old one becomes dead bytes.
//   - pols, the policy index: the compiled policies the map's keys are
//     under, with a count of keys per policy, so that a slot names its
//     policy in 16 bits and a policy no key uses is let go.
//
// Keys are hashed by Seed.Hash, a keyed wyhash, under a random Seed the
// caller draws once (MakeSeed) and gives Init. The table is Robin Hood
// hashing with linear probing and backward-shift deletion (no
// tombstones): the home slot comes from the hash's low 32
// bits scaled to the table's size (a multiply, so sizes need not be
// powers of two), and the caller may pick its lock from the hash's high
// bits, so one hash per call serves both. A lookup stops at the first
// slot nearer its home than the probe is to the key's, so a miss costs
// about as much as a hit. The table grows by half once it is 7/8 full
// (a growth rehashes every key from its record), and shrinks to half
// full once it falls to a quarter of that; the arena is compacted once
// dead records exceed a quarter of it.
//
// Memory per key, for a table between 7/12 and 7/8 full: 18 to 27 bytes of
// slot and the record (17 bytes for a 16-byte key), about 40 bytes in all.
//
// The slots array and the arena are allocated on whole cache lines of
// their own (layout.Lines), so that the states one map's owner writes
// never share a line with another map's.
//
// # Reading without the lock
//
// A Map is not safe for concurrent use: its owner locks, and every change
// is made under that lock. An index into the slots (from Find) is valid
// until the next Insert, Delete, SetRules or Tidy. One read may be made
// without the lock: Seek, which finds a key under a given policy and
// reads window 0's state. The changes that move slots, records or
// policies (Insert, Delete, SetRules, Tidy) advance a sequence count
// around themselves (odd while under way, a seqlock) and publish the
// arrays as they leave them (a view, replaced when an array is
// reallocated); the owner writes slots and policies with atomic stores.
// Seek loads the count, the view and the slots' words atomically, reads
// key bytes only of records named by refs it loaded (bytes written before
// the ref was stored, and never again in that array), and reports a hit
// only if the count has not moved: what it returns is then the key's state
// under that policy at the instant it loaded it. A change to states alone
// (SetFirst, Store) leaves the count as it is, so a hot key's spends do
// not make its readers retry. Version returns the count, so that an owner
// that takes the lock after a Seek may use the slot it found if nothing
// has moved since.
package flatmap
