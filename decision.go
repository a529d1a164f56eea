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
	// Policy is the name of the policy the decision was made under:
	// DefaultPolicy for a store's default, or a name given to WithPolicies.
	Policy string
	// Window is the index, in the policy's Limits, of the window Limit,
	// Remaining and WindowResetAfter describe: the one with the fewest
	// tokens left (the first of those), which, when the request was
	// denied, is one that denied it. It is 0 for a one-window policy.
	Window int
	// Limit is the limit of that window. It is the zero Limit under an
	// unlimited policy.
	Limit Limit
	// Remaining is the number of whole tokens left after this request in
	// the window with the fewest: the least over the policy's windows.
	// Under a window algorithm it is the largest cost the window would
	// allow now. Under an unlimited policy it is math.MaxInt.
	Remaining int
	// RetryAfter is 0 when Allowed; otherwise the time until every window
	// will hold the requested cost, rounded up to a whole nanosecond, so
	// that the same request made then is allowed (if nothing else spends
	// first).
	RetryAfter time.Duration
	// ResetAfter is the time until every window is full again if nothing
	// more is spent, rounded up to a whole nanosecond; 0 when all are full.
	// A fixed window is full again when the window it counted in ends; a
	// sliding window, when the window after it ends.
	ResetAfter time.Duration
	// WindowResetAfter is ResetAfter for the window Window alone: the time
	// until it is full again. It is what a RateLimit header reports for
	// that window.
	WindowResetAfter time.Duration
}
