// Package httplimit is net/http middleware that rate-limits requests with a
// keyrate.Limiter: one token bucket per client key.
//
//	limiter, _ := atomicbucket.New(keyrate.PerMinute(100))
//	mw, _ := httplimit.New(limiter)
//	http.ListenAndServe("127.0.0.1:8080", mw(mux))
//
// For each request the middleware computes a key (by default the client's
// IP address, see ByIP), a cost (1 by default, see WithCost), and calls the
// limiter's AllowN once. An allowed request goes on to the next handler
// carrying rate-limit headers; a denied one gets 429 Too Many Requests with
// Retry-After. Every value in those headers comes from the keyrate.Decision,
// so they are exact, not estimates.
//
// # Tiers
//
// With a keyrate.PolicyLimiter, each request can be decided under one of
// the store's named policies (keyrate.WithPolicies), typically the
// client's plan: TierByHeader reads its name from a header a gateway sets,
// TierByContext from the request's context, where authentication
// middleware put it with ContextWithTier, and WithTier from any function.
// The middleware then calls AllowTier instead of AllowN. A request naming
// no tier, or a tier the store does not have, is decided as without these
// options (the store's default policy, or what its WithPolicyFunc says):
// a wrong name is never an error and never admits more than naming none.
// A store's policies may change at runtime (its SetPolicy): the headers
// follow.
//
// With WithRefunds, a handler can give back tokens its request spent
// (Refund), when the upstream failed or the request cost less than
// charged.
//
// # Headers
//
// The fields follow draft-ietf-httpapi-ratelimit-headers-09 (the IETF
// httpapi working group's RateLimit header fields draft, revision 09, March
// 2025), in its structured-field form. With a policy name of "default" (see
// WithPolicyName) and keyrate.PerMinute(100):
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// The draft speaks of quota policies; each window (keyrate.Limit) of a
// keyrate.Policy is one, and a token bucket maps onto it as follows:
//
//   - q is the Limit's Burst, the most a client can spend at once;
//   - w is the Limit's FillTime in whole seconds, rounded up (at least 1):
//     the time an empty bucket takes to refill q;
//   - r is Decision.Remaining, the whole tokens left after this request
//     (in the window with the fewest, for a policy of several);
//   - t is, on an allowed request, the time until the window is full again
//     if nothing more is spent, in seconds rounded up (0 when it is full;
//     Decision.ResetAfter for a one-window policy, WindowResetAfter for
//     others); on a denied one it is the Retry-After value, since the draft
//     says the two SHOULD name the same instant.
//
// RateLimit-Policy lists every window of the policy the request was
// decided under, and RateLimit reports one: Decision.Window, the window
// that denied the request, or, when it was allowed, the one with the
// fewest tokens left. A window's item is named after its policy: the
// policy's name for a one-window policy (so a single Limit gives the
// fields above), and the name, '-' and the window's index in
// keyrate.Policy.Limits, from 0, for a policy of several. Under
// keyrate.PerSecond(10) and keyrate.PerHour(1000) in a policy "pro":
//
//	RateLimit-Policy: "pro-0";q=10;w=1, "pro-1";q=1000;w=3600
//	RateLimit: "pro-1";r=3;t=3590
//
// The default policy (keyrate.DefaultPolicy) is named as WithPolicyName
// says; any other by its own name, as a structured-field String: '"' and
// '\' are escaped, and bytes outside printable ASCII are sent as '?'. A
// request decided under an unlimited policy (keyrate.Unlimited) gets no
// rate-limit fields at all: nothing limits it.
//
// The fields that depend only on a policy's limits are built once and
// reused; they are rebuilt on the first request after the store's
// SetPolicy (the in-process stores and redisbucket count their policy
// changes, one atomic load a request), and whenever a decision's Limit is
// not the one they hold for its window. (With another PolicyLimiter only
// the latter: a change to a window that no decision reports shows once
// one does.)
//
// Counts are clamped to what a structured-field Integer holds, 0 to
// 999999999999999 (q for a Burst beyond it, r likewise), and times in
// seconds are at most 9223372037, the longest time.Duration rounded up:
// no value is ever negative or wrapped.
//
// A denied request also gets Retry-After in delay-seconds: RetryAfter
// rounded up to a whole second, so never 0 on a deny. WithLegacyHeaders adds
// X-RateLimit-Limit (q of the window RateLimit reports), X-RateLimit-Remaining
// (r) and X-RateLimit-Reset (t, in delay-seconds, not a Unix time).
//
// Go's http.Header stores field names in canonical form, so the fields go on
// the wire as Ratelimit-Policy and Ratelimit; HTTP field names are
// case-insensitive.
//
// # Failures never admit
//
// Nothing that goes wrong lets a request through unlimited. A request that
// carries no key (a ByHeader header missing or empty, an empty key from
// ByFunc) is the client's omission: 400 Bad Request by default, see
// WithNoKeyHandler. A key function that fails otherwise, a cost the
// limiter rejects
// (keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst), a key it cannot
// hold (keyrate.ErrInvalidKey) and a policy that the store's own
// WithPolicyFunc names but the store lacks (keyrate.ErrUnknownPolicy) go
// to the error handler: 500 by default, see WithErrorHandler. Any other
// error from the limiter, such as a remote store's outage, goes to the
// store-error handler: 503 with Retry-After by default, see
// WithStoreErrorHandler. A tier the store lacks is not an error: the
// request gets what naming no tier gets (see WithTier).
//
// A limiter that takes a context (redisbucket.Store's AllowNContext,
// AllowTierContext and the refund variants) is called with the request's
// context, so that a store call ends when its request does.
//
// # Shadow mode
//
// WithShadow rolls a new limit out safely: every request is decided and
// gets its decision's header fields as usual, but none is refused. A
// request that would have been denied, or could not be decided, goes on
// to the wrapped handler and is reported to the ShadowFunc given, to be
// counted or logged; a would-be deny gets the RateLimit fields of its deny
// but no Retry-After. The buckets are what they would be without shadow
// mode: allowed requests spend, denied ones do not.
//
// # Requests in flight
//
// A rate bounds how often a client starts requests, not how many it has
// running. WithInflight caps those too, per key, with an inflight.Limiter
// (in process, or redisbucket's for a fleet): a request takes a slot of
// its key before the rate is decided and gives it back when the handler
// returns or panics. A request over the cap gets 429 with Retry-After: 1
// and a body that says "too many requests in flight", and no RateLimit
// fields (see WithInflightDeniedHandler). New's limiter may be nil for the
// cap alone. Shadow mode lets such a request through and reports
// ErrTooManyInFlight; the observer's events for the cap have
// keyrate.Event.Inflight set and the policy keyrate.InflightPolicy.
//
// # Client addresses behind proxies
//
// ByIP keys by the connection's remote address. Forwarding headers are read
// only when that address is in a trusted proxy range (TrustProxies), and
// then only the one header the proxies set (ForwardedHeader); see ByIP for
// the walk that picks the client out of the chain, for IPv6 grouping
// (link-local addresses are keyed whole), and for requests that came over
// a Unix socket (one key per socket).
package httplimit
