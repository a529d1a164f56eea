// Package keyrateprom exports keyrate's metrics to Prometheus: how often
// clients hit their limits, per policy (tier), how many keys a store tracks,
// how many it evicted and refused, and how often a store failed or answered
// by its failure policy.
//
// A Metrics is both the keyrate.Observer a store or middleware reports its
// decisions to and the prometheus.Collector that exposes them:
//
//	m := keyrateprom.New("api")
//	store, err := atomicbucket.New(limit, keyrate.WithObserver(m))
//	...
//	m.Watch(store) // keys, evictions and refusals, read from Stats at each scrape
//	prometheus.MustRegister(m)
//
// Give m to the store (keyrate.WithObserver) or to the middleware
// (httplimit.WithObserver, grpclimit.WithObserver), not both: each would
// count every request. The middleware's events add what the store cannot
// know: shadow-mode denials and requests that had no key.
//
// # Metrics
//
// Every metric has the constant label store, the name given to New, so that
// the Metrics of several stores can share a registry.
//
//   - keyrate_decisions_total{policy, decision}: decisions, decision being
//     "allowed" or "denied". A denial in shadow mode counts as "denied" and
//     also in keyrate_shadow_denied_total.
//   - keyrate_shadow_denied_total{policy}: denials that shadow mode let
//     through.
//   - keyrate_cost_allowed_total{policy}: the cost allowed (tokens spent),
//     which differs from the allowed decisions when requests cost more
//     than 1.
//   - keyrate_errors_total{policy, error}: calls that ended in an error
//     rather than a decision, by kind: "store_full" (keyrate.ErrStoreFull),
//     "unknown_policy", "invalid_cost" (keyrate.ErrInvalidCost and
//     ErrCostExceedsBurst), "invalid_key" (keyrate.ErrInvalidKey: a
//     middleware found no key or could not read one, or redisbucket
//     refused one), "canceled"
//     (the caller's context ended: context.Canceled or DeadlineExceeded),
//     "unsupported" (keyrate.ErrUnsupportedAlgorithm: a Reserve or Wait
//     under a policy whose algorithm cannot reserve, such as
//     keyrate.SlidingLog) and "backend" (anything else: a Redis error).
//   - keyrate_degraded_total{policy, decision}: answers a failure policy
//     gave instead of the store (redisbucket when Redis failed: every
//     Redis failure that was not the caller giving up). They count in
//     keyrate_decisions_total too, or, under FailClosed, whose answer
//     carries redisbucket.ErrUnavailable, in keyrate_errors_total with
//     error="backend".
//   - keyrate_keys: keys tracked now; keyrate_evictions_total: buckets
//     evicted; keyrate_refused_total: new keys refused at WithMaxKeys's cap.
//     These three come from the watched store's Stats, read at each scrape,
//     and exist only for a Metrics that watches one. The two counters count
//     from the Watch call on, and carry over when a later Watch replaces
//     the store, so that they never go backwards (see Watch).
//
// The policy label is bounded by the policies a store has, plus the names
// asked for that it lacks (keyrate_errors_total{error="unknown_policy"});
// Metrics keeps at most MaxPolicies policy label values and counts any
// further name as "other", so a client that picks its own tier name cannot
// grow the registry without bound (a policy of the store's that is itself
// named "other" shares that label). Names the store lacks take at most
// MaxUnknownPolicies of them, so that such a client cannot crowd the
// store's own policies out of their labels either. A name that is not
// valid UTF-8, which Prometheus refuses as a label value, is labelled with
// each invalid byte sequence replaced by U+FFFD, and one longer than
// MaxPolicyLabel bytes with its first bytes and "...", so that no scrape
// carries a client's long key in each of a policy's series.
//
// # Cost
//
// Observe does one lookup in a concurrent map (by policy name) and one to
// three atomic adds, and allocates nothing once the policy has been seen;
// a scrape reads the counts. A name past the bounds above (counted as
// "other", not UTF-8, or longer than MaxPolicyLabel) takes a lock and is
// relabelled at each event instead: such names are a client's, not a
// store's.
package keyrateprom
