// Package striped is the keyrate store with N hash-selected lock stripes,
// each a mutex and a pointer-free hash table from key to packed states.
// Create a Store with New; the type's documentation says which method to
// call when. The sections below are how it works, for those who operate
// or review it.
//
// # The request path
//
// Each stripe is a sync.Mutex and a pointer-free open-addressing table
// (package internal/flatmap: Robin Hood slots of 16 bytes holding window
// 0's state and a reference into an append-only arena of the keys' bytes,
// with the states of a key's other windows after its bytes). A call
// hashes the key once and reads the clock; the hash's top bits pick the
// stripe and its low bits the key's home slot. On a stripe that denied a
// call lately (within its last 64 spends), a known key of a policy of
// one window is then found without the lock (flatmap.Map.Seek: atomic
// loads under the table's sequence count, a seqlock that only a change to
// the table, an insertion, eviction, growth or move to another policy,
// advances). If the state read so proves the request denied, that is the
// answer: the call takes no lock and writes nothing, and is decided as a
// locked call that took the lock at the instant of that read would be,
// with the same Decision (the clock is read before, and the arithmetic is
// pure). On other stripes the lookup without the lock would cost a spend
// about 70 instructions on one core, so a call there locks first, as a
// spend must, and a deny under the lock writes nothing and marks the
// stripe: a key denied again and again takes the lock once. Otherwise the
// call locks the stripe, uses the slot found if the
// sequence count has not moved (and looks the key up again if it has),
// applies keyrate's shared transition to the key's state and unlocks. A
// new key, a key under another policy, a policy of several windows or a
// sliding log, and a reading that overlapped a change to the table take
// the lock from the start.
//
// A deny so costs the hash, the clock reading and the lookup, and writes
// nothing: however many cores deny requests for one key, the lines they
// read stay in every core's cache. A spend pays for the lookup outside
// the lock and the check of the count under it: about 70 instructions a
// call more than a lookup under the lock took (callgrind, BenchmarkAllow
// wl=hotkey at -cpu 1: 471 against 400), in exchange for a lock held for
// the arithmetic alone. A spend on a stripe that has not denied lately
// pays only the check of the stripe's mark: 415 instructions on wl=hotkey
// against 401 before the lookup without the lock existed; a deny without
// the lock, 424 (against 395 for a deny under the lock, which wrote the
// lock's line).
//
// A reservation is a spend allowed past the fill time by the maximum wait
// (see keyrate.WaitLimiter), decided like any spend (and denied without
// the lock like one), and Cancel is decided under the lock. Wait creates
// no timer when the tokens are there, and otherwise sleeps on the store's
// clock on the caller's goroutine.
//
// # Layout
//
// What a call reads and writes is laid out so that calls on different
// stripes never take a cache line from each other, and denies take none
// at all. A stripe is three cache lines: the table's header, whose first
// line holds all that a lock-free read needs (sequence count, the pointer
// to the table's current arrays), written only by a change to the table,
// and the mutex on a line of its own, since every locked call writes it.
// The stripes array is at least 32 KiB, so that it starts on a page (a
// smaller array of objects with pointers starts 8 bytes into its slot,
// which would split every stripe across four lines). Each stripe's slots
// and arena are allocated on whole cache lines of their own
// (layout.Lines): the allocator packs small objects of a size class side
// by side (288 bytes for a table of 18 slots), so two stripes' tables
// could share a line, and spends under two different locks take it from
// each other. Tests read the addresses and fail if any of this regresses.
//
// The hash is flatmap.Seed.Hash, a keyed wyhash (the construction Go's
// runtime hashes its own map keys with on processors without AES
// instructions), under four 64-bit keys drawn at random per Store, so keys
// crafted to land on one stripe, or one run of slots, in one store do not
// in another, and none can be crafted without the seed (see
// flatmap.Seed.Hash for why). A 16-byte key hashes in about 20
// instructions, inlined into the hot path, against about 60 for
// hash/maphash, which the store used before (BenchmarkHash).
//
// # Memory
//
// The tables hold no pointer but a short per-stripe index of the compiled
// policies their keys are under (and the log of each key under a
// keyrate.SlidingLog policy, a heap object of its own), so the garbage
// collector does not scan the keys: with a million 16-byte keys the store
// holds about 38 bytes a key and a forced GC has nothing of theirs to mark
// (BenchmarkMemory). With keyrate.WithHashedKeys the key is its 64-bit
// hash, stored in the arena in place of its bytes (about 28 bytes a key).
// Known keys cost no allocation; a new key may grow its stripe's table (by
// half, rehashing its keys) or arena (by an eighth), amortised over the
// keys that filled them. A stripe refuses a new key with
// keyrate.ErrStoreFull, as a full store does, only if its arena would pass
// 4 GiB or its keys be under more than 65535 policies at once. A stripe
// takes 192 bytes before it holds a key; its table and arena each take
// up to a cache line more than they hold, to start on a line of their own
// (see Layout).
//
// # Eviction
//
// The store removes idle keys exactly: only a key whose bucket is full
// again (idle for at least Limit.FillTime since it was last emptied), which
// is indistinguishable from a new one. The check and the delete happen
// under the stripe lock that every spend takes, so no spend can fall
// between them. Every insertion of a new key first examines 16 keys of its
// stripe, a run of slots from a random one (a random sample, since keys
// sit where their hashes put them), under the lock it already holds, and
// evicts those that are full: bounded work per insertion that keeps a
// store without a cap within about 16/15 of its keys that are not full.
// A stripe's table shrinks once it falls to a quarter of its maximum load,
// and its arena is compacted once the records of removed keys pass a
// quarter of it. The whole store is swept stripe by stripe, one lock at a
// time, on demand with Sweep and in the background with
// keyrate.WithSweepInterval (which turns off the sampling on insertion,
// except in a full store).
//
// keyrate.WithMaxKeys caps the keys tracked. A new key that finds the
// store full, and no full key in its stripe's sample, makes the caller
// sweep the whole store, at most once per cap/16 such refusals (amortised
// 16 keys examined per refusal), and otherwise examine at most 64 keys of
// the stripes that follow its own, one stripe lock at a time and no more
// than 1024 stripes, evicting the full ones; it then tries once more, and
// fails closed with keyrate.ErrStoreFull if the store is still full. Len
// and Stats.Keys read one counter, a snapshot never above the cap. See
// package internal/sweep for the argument that eviction never changes a
// decision.
package striped
