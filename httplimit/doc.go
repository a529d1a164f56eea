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
// The draft speaks of quota windows; a token bucket maps onto them as
// follows:
//
//   - q is the Limit's Burst, the most a client can spend at once;
//   - w is the Limit's FillTime in whole seconds, rounded up (at least 1):
//     the time an empty bucket takes to refill q;
//   - r is Decision.Remaining, the whole tokens left after this request;
//   - t is, on an allowed request, Decision.ResetAfter in seconds rounded up
//     (the time until the bucket is full again, 0 when it is); on a denied
//     one it is the Retry-After value, since the draft says the two SHOULD
//     name the same instant.
//
// Counts are clamped to what a structured-field Integer holds, 0 to
// 999999999999999 (q for a Burst beyond it, r likewise), and times in
// seconds are at most 9223372037, the longest time.Duration rounded up:
// no value is ever negative or wrapped.
//
// A denied request also gets Retry-After in delay-seconds: RetryAfter
// rounded up to a whole second, so never 0 on a deny. WithLegacyHeaders adds
// X-RateLimit-Limit (q), X-RateLimit-Remaining (r) and X-RateLimit-Reset (t,
// in delay-seconds, not a Unix time).
//
// Go's http.Header stores field names in canonical form, so the fields go on
// the wire as Ratelimit-Policy and Ratelimit; HTTP field names are
// case-insensitive.
//
// # Failures never admit
//
// Nothing that goes wrong lets a request through unlimited. A key function
// that fails, or returns an empty key, and a cost the limiter rejects
// (keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst) or a key it cannot
// hold (keyrate.ErrInvalidKey) go to the error handler: 500 by default, see
// WithErrorHandler. Any other error from the limiter, such as a remote
// store's outage, goes to the store-error handler: 503 with Retry-After by
// default, see WithStoreErrorHandler.
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
