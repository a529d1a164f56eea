// Package mutexbucket is the keyrate store with one mutex per bucket: the
// classic design, and the easiest to reason about. Create a Store with
// New; the type's documentation says which method to call when. The
// sections below are how it works, for those who operate or review it.
//
// # The request path
//
// A call looks the key up in an xsync.MapOf from key to bucket (lock-free
// for a known key), reads the clock, locks that key's bucket, applies
// keyrate's shared transition and unlocks. The map is never locked while a
// bucket is, and a new key's bucket is created by one atomic
// get-or-create, so two first requests for a key share one full bucket.
//
// A request on a known key of one window that the bucket's state already
// denies takes no lock and writes nothing: the state is read with one
// atomic load (it is written atomically, under the lock), after the
// clock, and a deny found there is the answer, with the Decision built
// from that state; a hot key that is being denied is read-shared by every
// core, as in atomicbucket. The locked path reads the clock before it
// locks, so this deny is the one it would give had it locked the bucket
// at the load. A request the read state would allow takes the lock and
// decides again from the state under it. A key of several windows (or a
// SlidingLog), a bucket not spent from yet or swept, and a key under
// another policy take the locked path for a deny too. A
// reservation is a spend allowed past the fill time by the maximum wait
// (see keyrate.WaitLimiter), decided under the bucket's mutex like any
// spend, and so is Cancel; Wait creates no timer when the tokens are
// there, and otherwise sleeps on the store's clock on the caller's
// goroutine. Known keys cost no allocation; each new key
// allocates one bucket (and, for several windows, an array of its other
// states).
//
// # Eviction
//
// The store removes the buckets of idle keys exactly: only a bucket that is
// full again (idle for at least Limit.FillTime since it was last emptied),
// which is indistinguishable from a new one. The sweep marks such a bucket
// as a tombstone, a state no live bucket holds, under the bucket's mutex,
// in the same critical section that finds it full, then deletes it from
// the map; a call that locks a marked bucket looks the key up again, so no
// spend is ever lost.
//
// A sweep falls due after as many insertions of new keys as the previous
// one left keys (amortised one key examined per insertion) and runs on a
// short-lived goroutine of its own, holding one lock at a time, so that no
// request pays for walking the map; inserters wait for it only if it falls
// a whole period behind. Sweeps also run in the background with
// keyrate.WithSweepInterval, and on demand with Sweep.
//
// keyrate.WithMaxKeys caps the keys tracked: a new key that finds the
// store full examines at most 64 buckets for one it can evict, or that a
// sweep is removing (and starts a whole sweep at most once per cap/16
// such refusals), tries once more for a slot, and otherwise fails closed
// with keyrate.ErrStoreFull. Len and Stats.Keys read one counter, a
// snapshot never above the cap. keyrate.WithHashedKeys keeps a seeded
// 64-bit hash instead of each key. See package internal/sweep for the
// argument that eviction never changes a decision.
package mutexbucket
