package keyrate

// Limiter is a per-key rate limiter: every key has its own token bucket,
// created full on first use, all under one Limit.
//
// Every implementation is safe for concurrent use and never admits more than
// the limit, however many goroutines call it at once on the same key.
type Limiter interface {
	// Allow reports whether one token may be spent for key now, and spends
	// it if so. It is shorthand for AllowN(key, 1) when only the answer is
	// needed; it reports false if AllowN would return an error.
	Allow(key string) bool

	// AllowN spends cost tokens for key if the bucket holds that many, and
	// reports the decision. It returns an error wrapping ErrInvalidCost for
	// cost < 1 and ErrCostExceedsBurst for cost > Burst; a call that returns
	// an error spends nothing and stores nothing.
	AllowN(key string, cost int) (Decision, error)

	// Peek reports the state of key's bucket without spending: Allowed and
	// RetryAfter say what a cost-1 request would get now, Remaining is the
	// whole tokens available now. An unknown key reports a full bucket and
	// is not stored.
	Peek(key string) Decision

	// Len returns the number of keys the limiter tracks.
	Len() int
}
