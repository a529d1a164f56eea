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
// with the states of a key's other windows after its bytes), padded to
// whole cache lines so that stripes never share one. A call hashes the key
// once, reads the clock, locks the stripe the hash's top bits pick, finds
// the key's slot from the hash's low bits (comparing the key's bytes in
// the arena), applies keyrate's shared transition to the key's state and
// unlocks. A reservation is a spend allowed past the fill time by the
// maximum wait (see keyrate.WaitLimiter), decided under the stripe's lock
// like any spend, and so is Cancel. Wait creates no timer when the tokens
// are there, and otherwise sleeps on the store's clock on the caller's
// goroutine.
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
// 4 GiB or its keys be under more than 65535 policies at once.
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
