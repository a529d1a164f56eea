// Package inflight caps the requests a key may have running at once: at
// most N in flight per key. A rate limit (keyrate) bounds how often a
// client may start requests; a concurrency limit bounds how many of them
// it may hold open, so that slow requests cannot pile up behind a client
// that stays under its rate.
//
//	lim, _ := inflight.New(10)
//	slot, err := lim.TryAcquire("alice")
//	if err != nil || !slot.Acquired() {
//		return // 429: ten of alice's requests are already running
//	}
//	defer slot.Release()
//
// Store is the in-process limiter; redisbucket's InflightStore caps a key
// across a fleet. Both implement Limiter, which httplimit and grpclimit
// take (their WithInflight options).
//
// # Slots
//
// An acquire returns a Slot, a small value. Its Release gives the slot
// back once: a second Release of it, or of a copy, does nothing, and a
// Slot can release only the key and store it came from. The zero Slot
// holds nothing. Release a slot on every path, typically with defer, so
// that a panic releases it too; a slot that is never released stays held
// for the life of the in-process Store (redisbucket's expires after its
// lease).
//
// # The in-process store
//
// Each key has a count of slots held, one atomic word in an xsync map; an
// acquire increments it by compare-and-swap while it is below N, a release
// decrements it. Neither takes a lock or allocates for a known key: the
// handle a Slot points to (its holder) comes from the key's cache of one
// (the holder its last release gave back) or else a per-store sync.Pool,
// and carries a generation that a release advances by compare-and-swap,
// which is what makes the second release of a slot, or a release of a
// copy after the holder was reused by another acquire, do nothing. A key
// with traffic keeps one idle holder (24 bytes) until it is swept.
//
// Idle keys (none held) are swept by the acquire that adds a key once the
// map holds twice the keys the last sweep kept, and at least 1024: the
// cost is amortised over new keys, and the map stays near that size. A
// sweep retires a key's count by swapping 0 for a
// dead mark before it deletes the key; an acquire that meets the mark looks
// the key up again, so an acquire racing a sweep never counts into a
// deleted key, and eviction never changes a decision.
//
// # Priority shedding
//
// WithReserved keeps some of each key's slots for critical requests
// (TryAcquireCritical, or a context marked by Critical): a client at its
// cap of ordinary requests still gets the ones that matter through.
//
// # Waiting
//
// Acquire waits for a slot, with a context: a waiter sleeps on a channel
// of its key, made only when someone waits, and woken by a release.
package inflight
