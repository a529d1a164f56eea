package keyrate

import "time"

// Decision is a store's answer to one request, with what an HTTP server
// needs for a 429 response and rate-limit headers. Its durations are never
// negative: a debt longer than a time.Duration can hold (only a clock set
// back by a century can make one) saturates at the longest duration.
type Decision struct {
	// Allowed reports whether the request may proceed. When it is true the
	// tokens have been spent.
	Allowed bool
	// Limit is the limit the decision was made under.
	Limit Limit
	// Remaining is the number of whole tokens left in the bucket after this
	// request.
	Remaining int
	// RetryAfter is 0 when Allowed; otherwise the time until the bucket will
	// hold the requested cost, rounded up to a whole nanosecond, so that the
	// same request made then is allowed (if nothing else spends first).
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again if nothing more
	// is spent, rounded up to a whole nanosecond; 0 for a full bucket.
	ResetAfter time.Duration
}
