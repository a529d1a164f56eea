// Package sweep holds the bookkeeping that bounds a keyrate store's memory
// and that every in-process store shares: the key count kept against the
// WithMaxKeys cap together with the Stats counters (Book), the pacing that
// decides when a call on the request path pays for a sweep (Pacer), the
// optional background sweeper (Background), the floor (Floor), and, for
// mutexbucket, which keeps one pointer per key in an xsync map, the map
// itself with its exact, tombstone-based eviction (Map). striped and
// atomicbucket keep their keys in pointer-free tables of their own
// (internal/flatmap, internal/casmap) and use the rest.
//
// # Why removing a full bucket changes no decision
//
// A bucket whose state s is full at tick t (s ≤ t, rules.Rule.Full)
// behaves, for every request read at a tick now ≥ t, exactly like a new
// bucket: Take(s, now, c) = max(s, now) + c·I = now + c·I = Take(0, now, c).
// So a sweep that reads the clock once (t), and removes only buckets full
// at t, changes nothing for any request whose clock reading is at least t.
// Two things remain to be made safe, and the stores do both:
//
//  1. A request that looked the bucket up before the removal must not spend
//     from the detached bucket while a fresh one serves others (that would
//     lose its spend: over-admission). The check "full at t?" and the
//     removal are therefore one atomic step with respect to spending: the
//     sweeper marks the bucket rules.Tombstone under the bucket's lock, or
//     with one compare-and-swap from the very state it judged full, or (in
//     the striped store) checks and deletes under the stripe lock that every
//     spend takes. A spender that then finds the mark looks the key up again.
//     A deny decided from a state read without the lock (mutexbucket's and
//     atomicbucket's) writes nothing, so it needs no such step: it read a
//     live state, before any mark, with a clock reading taken before that,
//     and is the deny a store that never evicts gives at that reading.
//
//  2. A request whose clock reading is older than t (it read the clock,
//     then lost a race to the sweeper) must not meet a fresh bucket with
//     that stale reading: Take(0, now) with now < s would forget the debt
//     s − now that the old bucket still had at that reading. The stores
//     arrange that a fresh bucket is always spent with a reading taken after
//     the removal, hence at least t for a clock that never runs backwards in
//     happens-before order (clock.System and clock.Coarse): mutexbucket
//     reads the clock after getting the bucket from the map, and again
//     after every retry; striped and atomicbucket reread the clock under
//     the lock of the key's stripe or segment when a key is missing and
//     its reading is older than the latest reading at which an evicted key
//     was full (the floor, below). Such a request is then decided exactly as the same
//     request would be by a store that never evicts, had it read the clock
//     a moment later, within its own call.
//
//  3. Another key's eviction must not reach a new key either. A new bucket
//     starts from the floor (below), which a sweep of some other key may
//     raise after the new key's request read the clock and before it
//     spends: spent at that older reading, the raised floor would charge the
//     new key the other bucket's debt. Every store rereads the clock when a
//     new bucket's floor lies ahead of the request's reading (Floor.Start in
//     mutexbucket and atomicbucket, the stripe's floor check in striped),
//     which puts the reading at or after the sweep's, where the floor is a
//     full bucket.
//
// As a last guard, for clocks that do step backwards (clock.Manual), a
// fresh bucket is read at its first spend as the store's floor, the
// latest reading at which any bucket it evicted was full, each window
// read as its ticks there (per stripe in the striped store), rather than
// as 0: for every reading at or after an evicted
// bucket's state the two agree, and before it the floor holds fewer
// tokens. So eviction can only deny more, never admit more, whatever the
// clock does; and a store that has evicted nothing behaves exactly as one
// that never evicts. (In mutexbucket a new bucket holds Fresh until
// that first spend, so that no sweep removes it in between.)
package sweep
