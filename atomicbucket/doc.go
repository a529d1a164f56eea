// Package atomicbucket is the lock-free keyrate store: each key's state is
// one 64-bit word of a pointer-free table, updated with compare-and-swap.
// Create a Store with New; the type's documentation says which method to
// call when. The sections below are how it works, for those who operate
// or review it.
//
// # The request path
//
// A call hashes the key once (seeded per store: see casmap.Map.Hash),
// finds the key's slot without taking a lock (the hash's top bits pick a
// segment of the table, its low bits the slot, and the key's bytes are
// compared in an append-only arena), reads the clock and runs a
// compare-and-swap loop: load the word, apply keyrate's shared
// transition, and swap the result in if no other goroutine changed the
// word meanwhile, else retry with the fresh word. A denied request writes
// nothing, so a hot key that is being denied is read-shared by every core.
// The reading of now is not retaken on a retry: a stale reading can only
// find fewer tokens (see the keyrate package documentation), so the loop
// never over-admits. A key of several windows uses its word as its lock as
// well: a call swaps the word to a locked value from the state it read,
// reads and writes every window, and releases the lock by storing window
// 0's new state (a denied call stores back the word alone). A caller that
// finds the word locked reads it again, up to 64 times, before it yields
// its processor to the holder. Allow on such a key that window 0's word,
// read after the clock, already denies is denied from that read, with no
// lock and no write (any window's deny denies the request); a deny by a
// later window, and AllowN and Reserve, whose Decision or slot need every
// window's state, take the lock. A known key of several windows is found
// by the one-window lookup. Under a policy of token buckets alone the
// call is one frame with the arithmetic inlined: window 0 is decided from
// the word it loads (its new state kept for the unlock), the other
// windows' states are located in the key's record before the lock is
// taken, and decided under it, all or nothing. On one hot key of two
// windows Allow costs about 1.36 times the instructions of one window's
// (514 and 378 at -cpu 1, callgrind; 717 before this path, 1.89 times).
// A policy with a fixed or sliding window among its windows is decided by
// the shared transition over a copy of the states, under the lock.
//
// # Memory
//
// The table holds no pointer but the segments' short policy indexes and
// the lists of their arena chunks, so the garbage collector does not scan
// the keys. A slot is 16 bytes (window 0's state, and a word naming the
// key's record in the arena, its policy and 8 bits of its hash), in a
// table kept between 7/12 and 7/8 full; a record is the key's bytes after
// its length (or, with keyrate.WithHashedKeys, the key's 64-bit hash),
// then its other windows' states. With a million 16-byte keys the store
// holds about 43 bytes a key (34 with keyrate.WithHashedKeys), and a
// forced GC has nothing of theirs to mark: 1.1 to 1.5 ms on the 2-core
// development VM (5 runs), against 70 to 125 ms for the xsync map of a
// pointer per key that the store used before (BenchmarkMemory,
// BenchmarkKeyMemory); with ten million keys, 36 bytes a key and a forced
// GC of 3 to 8 ms.
//
// Writers take the lock of the key's segment (a power of two of them, 4
// per GOMAXPROCS, padded to cache lines): a new key, a removal, a change
// of policy and a rebuild of the segment's table. A rebuild (growing the
// table by half once it is 7/8 full of live and removed keys, shrinking it
// after a sweep, dropping removed keys) swaps every key's word to a moved
// mark, copies it into the new table and publishes that: a spend whose
// swap finds the mark waits for the rebuild and looks the key up again.
// Known keys wait only while their segment is being rebuilt, and never
// for anything else. Known keys cost no allocation; a new key may grow its
// segment's table or arena, amortised over the keys that filled them. A
// segment refuses a new key, or a key's move to another policy, with
// keyrate.ErrStoreFull, as a full store does, only if its arena would pass
// 2 GiB or its keys be under more than 65535 policies at once; a key
// refused a move keeps its slot and its states.
//
// # Eviction
//
// The store removes idle keys exactly: only a key whose bucket is full
// again (idle for at least Limit.FillTime since it was last emptied),
// which is indistinguishable from a new one. The sweep swaps such a word
// to a tombstone, a value no live word holds, with one compare-and-swap
// from the very value it judged full, under the segment's lock; a spend's
// compare-and-swap therefore either lands before the mark (and the sweep
// leaves the word alone) or finds the mark and looks the key up again, so
// no spend is ever lost. A removed slot is never reused: the key goes into
// a new slot, and the dead one is dropped when the table is rebuilt.
//
// Every insertion of a new key first examines 16 keys of its segment, a
// run of slots from a random one, under the lock it already holds, and
// removes those that have been full for the eviction grace period
// (keyrate.WithEvictionGrace): bounded work per insertion that keeps a
// store without a cap within about 16/15 of its keys that are not full.
// The whole store is swept segment by segment, one lock at a time and
// letting go of it every 256 keys, on demand with Sweep and in the
// background with keyrate.WithSweepInterval (which turns off the sampling
// on insertion, except in a full store).
//
// keyrate.WithMaxKeys caps the keys tracked. A new key that finds the
// store full, and no full key in its segment's sample, makes the caller
// sweep the whole store, at most once per cap/16 such refusals, and
// otherwise examine at most 64 keys of the segments that follow its own,
// evicting the full ones; it then tries once more, and fails closed with
// keyrate.ErrStoreFull if the store is still full. Len and Stats.Keys read
// one counter, a snapshot never above the cap. See package internal/sweep
// for the argument that eviction never changes a decision.
//
// # Policies and waiting
//
// A key whose policy changes (a tier, SetPolicy) gets a new slot, with its
// states carried over by the rule of keyrate.PolicyLimiter. A reservation
// of a one-window key is the same compare-and-swap loop as a spend, with
// the bucket's arrival time allowed past its fill time by the maximum
// wait (see keyrate.WaitLimiter): lock-free, and no slower than AllowN.
// Wait creates no timer when the tokens are there, and otherwise sleeps on
// the store's clock on the caller's goroutine; Cancel is one more
// compare-and-swap, from the very state the reservation left.
//
// # Hot keys
//
// One key that every core calls serialises on its word: each call's
// compare-and-swap takes the word's cache line from the core that wrote it
// last, and fails when another core wrote it meanwhile. WithHotKeys names
// such keys. A hot key under a fast enough one-window token bucket is
// served from shards (package internal/hotshard): 2·GOMAXPROCS of them,
// rounded up to a power of two, each on its own cache line, a goroutine
// keeping to one. A shard takes a batch of tokens from the key's word
// (what the rate refills in a millisecond, at most Burst/(4·shards)),
// charged its tokens plus a cover of its lifetime, a millisecond, and
// serves them with one compare-and-swap on its own line until the batch
// expires; a refill or a denial gives back what the batch did not use.
// Batches are taken only while the word keeps half its burst. The design
// note docs/design/hotkeys.md proves that this never over-admits, bounds
// what it may deny, and says why, at many cores under sustained load, a
// hot key is served mostly from its word.
package atomicbucket
