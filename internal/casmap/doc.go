// Package casmap is a pointer-free concurrent hash table from a key to its
// packed keyrate states, read without a lock: a known key's window-0
// state is one word of the table, updated by compare-and-swap, so a spend
// on a known key takes no lock. Writers (a new key, a removal, a change of
// policy, a rebuild) take the lock of the key's segment. It is the table
// of atomicbucket; the garbage collector never scans its keys.
//
// # Layout
//
// A Map is a power of two of segments, each padded to whole cache lines:
// a sync.Mutex for writers, an atomic pointer to its current table, and
// its policy index. One keyed 64-bit hash per call (Map.Hash: the keyed
// wyhash of flatmap.Seed, which the striped store uses too, inlined for a
// key of 8 to 16 bytes) picks the segment by its bits from 40 up and the home slot by its low
// 32 bits (scaled by a multiply, so that table sizes need not be powers
// of two); bits 32 to 39 are a tag that rejects most other keys without
// reading their bytes. A lookup of a key of 8 to 16 bytes (Map.Lookup) is
// one call that hashes the key and probes, with no stack check: fewer
// instructions than the xsync map it replaced in atomicbucket, whose
// entries are pointers the garbage collector scans.
//
// A table is
//
//   - slots, an open-addressing array of 16-byte slots with linear
//     probing: state, window 0's state (compare-and-swapped by spenders),
//     and meta, which names the key's record in the arena (chunk and
//     offset, 32 bits), the index of its policy in the segment's policy
//     index (16 bits) and the tag, with a bit that marks the slot used; a
//     meta of 0 is an empty slot. A slot's meta is written once, when its
//     key is inserted, and never changes: entries never move while readers
//     probe (this is why the table is not Robin Hood).
//   - arena, a list of pointer-free byte chunks (256 bytes to 64 KiB,
//     doubling; a record over 64 KiB gets a chunk of its own) of records:
//     the key's length as a uvarint and its bytes (or, for hashed keys, the
//     64-bit hash alone), followed by the states of the key's other
//     windows, 8 bytes each. Chunks never move or shrink while their table
//     is current, so a record's bytes, written before its slot's meta is
//     published, never change, but for the other windows' states, which
//     only the holder of the slot's lock (Locked, below) reads or writes.
//   - the policy index of the segment: the compiled policies its keys are
//     under, published copy-on-write through an atomic pointer, with a
//     count of keys per policy under the segment's lock; a policy no key
//     uses is let go.
//
// # The state word
//
// A slot's state is a live state (below 2^63), or one of the sentinels
// at the top of the word: rules.Tombstone (the key was removed: terminal),
// Locked (a caller holds a key of several windows: it swapped Locked in
// from the state it read, and releases by storing window 0's new state)
// and Moved (a rebuild copied the slot into a new table: terminal).
// sweep.Fresh, the pointer stores' "not spent from yet", never appears:
// a new key is inserted in the states after its first spend.
//
// A removed slot is never reused in place: it stays in the table, dead,
// counted in the load, until the segment's table is rebuilt, so a
// reader's compare-and-swap on a dead slot can never succeed, and a
// slot's meta names the same key and policy for the slot's whole life. A
// key whose slot died is inserted again in a new slot, further along its
// probe sequence; a lookup skips dead slots.
//
// A rebuild (growth, shrinking, dropping dead slots and records) runs
// under the segment's lock: it swaps every live slot's state to Moved
// (waiting while one is Locked), copies the state it swapped out and the
// record into a new table, and publishes the new table. A spender whose
// compare-and-swap fails on Moved, or that loads Moved, waits for the
// rebuild (takes the segment's lock and lets go of it) and looks the key
// up again: a stale spender's swap on the old table can never succeed
// after the copy, so no spend is lost or made twice. Known keys wait only
// while their segment is being rebuilt.
//
// # Memory
//
// A table grows once its used slots (live and dead) would pass 7/8 of it,
// to 7/12 full of live keys; after a sweep it shrinks once live keys fall
// to a quarter of that maximum, and one without live keys is replaced by
// an empty table of 8 slots. A key costs 16 bytes of slot per load factor
// (18 to 27 bytes between 7/8 and 7/12 full) and its record (17 bytes for
// a 16-byte key; 8 for a hashed key), plus the unused end of the last
// arena chunk (at most 64 KiB a segment): with a million 16-byte keys,
// 42.7 bytes a key of heap in all (33.8 hashed), and nothing for the
// garbage collector to scan but a few hundred chunk pointers.
//
// Readers of the arena follow the race detector's rules: they read a
// record's bytes only after loading the meta that names it (published by
// an atomic store after the bytes were written), and the chunk list after
// that meta (it is published, by an atomic store, before any meta naming
// a new chunk).
package casmap
