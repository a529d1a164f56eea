// Package keyrateotel reports keyrate's metrics as OpenTelemetry
// instruments: how often clients hit their limits, per policy (tier), how
// many keys a store tracks, how many it evicted and refused, and how often
// a store failed or answered by its failure policy. It is keyrateprom's
// counterpart, counting the same events under the same bounds.
//
//	m, err := keyrateotel.New("api", keyrateotel.WithMeterProvider(provider))
//	...
//	store, err := atomicbucket.New(limit, keyrate.WithObserver(m))
//	...
//	m.Watch(store) // keys, evictions and refusals, read from Stats at each collection
//
// Call New once per store, at start-up: it creates the instruments from
// the provider given (by default otel.GetMeterProvider(), the global one)
// and registers the callback through which the provider reads them; Close
// removes it. Give m to the store (keyrate.WithObserver) or to the
// middleware (httplimit.WithObserver, grpclimit.WithObserver), not both:
// each would count every request. A Metrics is safe for concurrent use;
// one not made by New (nil, or the zero value) counts nothing and never
// panics.
//
// # Instruments
//
// All are asynchronous int64 instruments: Observe counts in memory, as
// keyrateprom does, and the provider reads the counts at each collection.
// All carry keyrate.store.name, the name given to New (absent when it is
// ""); keyrate.policy.name is the policy decided under. A policy, once
// seen, has a point in each per-policy instrument, at 0 until counted.
//
//   - keyrate.decisions (counter, {decision}; keyrate.policy.name,
//     keyrate.decision): decisions, keyrate.decision being "allowed" or
//     "denied". A denial in shadow mode counts as "denied", and also in
//     keyrate.shadow.denials (counter, {decision}; keyrate.policy.name).
//   - keyrate.cost.allowed (counter, {token}; keyrate.policy.name): the
//     cost allowed (tokens spent).
//   - keyrate.errors (counter, {error}; keyrate.policy.name, error.type):
//     calls that ended in an error rather than a decision, error.type being
//     "store_full", "unknown_policy", "invalid_cost", "invalid_key",
//     "canceled", "unsupported" or "backend" (a Redis error), as
//     keyrateprom's keyrate_errors_total documents them.
//   - keyrate.degraded.decisions (counter, {decision};
//     keyrate.policy.name, keyrate.decision): answers a failure policy gave
//     instead of the store (redisbucket when Redis failed). They count in
//     keyrate.decisions too, or, with an error, in keyrate.errors.
//   - keyrate.key.count (up-down counter, {key}): keys tracked now;
//     keyrate.key.evicted and keyrate.key.refused (counters, {key}):
//     buckets evicted, and new keys refused at WithMaxKeys's cap. They come
//     from the watched store's Stats, read at each collection, and have
//     points only while a store is watched; the two counters count from the
//     Watch call on and carry over a later Watch's switch of store (see
//     Watch).
//
// No semantic convention covers rate limiting: the names follow the
// general naming guidance (a keyrate namespace, dot-separated, pluralized
// counters of countable things, curly-brace units), and error.type is the
// general attribute.
//
// # Bounds and cost
//
// keyrate.policy.name is bounded exactly as keyrateprom bounds its policy
// label: at most MaxPolicies values, of which names the store lacks take
// at most MaxUnknownPolicies, any further name recorded as Other; a name
// that is not valid UTF-8 has each invalid sequence replaced by U+FFFD,
// and one longer than MaxPolicyLabel bytes is cut. Observe does one lookup
// in a concurrent map (by policy name) and one to three atomic adds, and
// allocates nothing once the policy has been seen, as keyrateprom's does
// (BenchmarkObserve, in the bench module, compares the two); the SDK does
// its work at each collection. Each policy's attribute sets are built
// when it is first seen, so that a collection builds none. Names past the
// bounds take a lock and are relabelled at each event.
package keyrateotel
