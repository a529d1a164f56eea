package redisbucket

import (
	"errors"
	"fmt"
)

// ErrUnavailable reports that Redis did not answer a call in time: the
// connection failed, the server returned an error, or the call's timeout
// ran out. It wraps the cause.
var ErrUnavailable = errors.New("redisbucket: redis unavailable")

// ErrMalformedBucket reports a bucket key that held a value no Store writes:
// another program's value, a value of another Redis type, or one out of
// range. The store answered as for an empty bucket instead (see
// Stats.Malformed); this error only goes to the WithOnError callback,
// never to a caller.
var ErrMalformedBucket = errors.New("redisbucket: malformed bucket value")

// FailurePolicy is what a Store answers when Redis does not. It is chosen
// at construction with WithFailurePolicy. Whatever the policy, a call never
// waits past the store's timeout, never panics, and the failure is counted
// in Stats and passed to the WithOnError callback.
type FailurePolicy int

const (
	// FailClosed denies: AllowN returns a denied Decision (Remaining 0,
	// RetryAfter the time cost tokens take to accrue in every window of
	// the key's policy, ResetAfter 0) and an
	// error wrapping ErrUnavailable, so that callers can tell an outage
	// from a rate limit (httplimit answers 503 instead of 429); Reserve
	// and Wait return that error. The default.
	FailClosed FailurePolicy = iota
	// FailOpen allows: AllowN returns an allowed Decision (Remaining 0,
	// RetryAfter 0, ResetAfter 0) and no error; Reserve returns an OK
	// Reservation with no delay, and Wait returns nil at once. The outage
	// shows only in Stats and the WithOnError callback: an error would
	// make generic callers treat the request as failed, defeating the
	// policy.
	FailOpen
	// FallbackLocal answers from an in-process store (an atomicbucket.Store
	// with the store's policies, its default policy replaced by
	// WithFallbackLimit if given) for as long as Redis does not answer, with
	// no error, as FailOpen. Every call tries Redis first, so Redis takes
	// over again on its first answer (with WithBreaker, on the first
	// probe's). The fallback's buckets are separate
	// from Redis's: a key starts full in one when it switches. A cost
	// above the fallback limit's Burst (but within the store's), which the
	// fallback could never allow, is denied as FailClosed denies (RetryAfter
	// the time cost tokens take to accrue under the store's policy), still
	// with no error. Reserve and Wait are the fallback's (atomicbucket's)
	// Reserve and Wait, sleeping on the store's local clock, and its
	// reservations cancel in the fallback; a cost the fallback can never
	// allow gets an error wrapping ErrUnavailable and the fallback's.
	FallbackLocal
)

// String returns the policy's name, "FailClosed", "FailOpen" or
// "FallbackLocal".
func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case FallbackLocal:
		return "FallbackLocal"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(p))
}

// Stats counts a store's calls to Redis since New (not counting New's check
// of maxmemory-policy: see Store.PolicyCheck). Each count only grows.
type Stats struct {
	// Calls is the number of Redis round trips attempted: one per AllowN,
	// AllowTier, Store.AllowAll's one call, Peek, Refund, Reserve, Wait,
	// Cancel (and a Wait's own cancel) and each SCAN page of Len (the
	// two-step's calls count as theirs), not counting calls rejected for
	// bad input, answered without Redis (an unlimited policy, a cancel
	// that cannot give anything back, the deny cache's denials, the open
	// circuit breaker's answers) or whose caller's context was done
	// before the call.
	Calls uint64
	// Errors is the number of those that failed: the outage counter.
	Errors uint64
	// Degraded is the number of decisions (refunds and reservations too)
	// the failure policy made instead of Redis.
	Degraded uint64
	// Malformed is the number of calls that found a value at the
	// bucket's key that no Store writes (see ErrMalformedBucket) and
	// answered as for an empty bucket.
	Malformed uint64
	// DeniedLocally is the number of requests the deny cache denied
	// (see WithDenyCache), with no round trip: not counted in Calls.
	DeniedLocally uint64
	// Leases is the number of leases taken (WithLeases), each one call.
	Leases uint64
	// Leased is the number of requests leases answered (a lease's first
	// included), of which all but the first of each lease sent nothing.
	Leased uint64
	// BreakerOpen reports whether a circuit breaker (WithBreaker; one per
	// server) is open now, or probing; false without a breaker.
	BreakerOpen bool
	// BreakerOpens is the number of times a breaker opened: after
	// failures in a row, or a failed probe.
	BreakerOpens uint64
	// BreakerCloses is the number of times a probe closed one again.
	BreakerCloses uint64
	// ShortCircuited is the number of calls an open breaker answered by
	// the failure policy without sending them (not counted in Calls or
	// Errors; counted in Degraded).
	ShortCircuited uint64
	// FleetNodes is the number of processes FallbackLocal's limits are
	// divided among (WithFallbackNodes, WithNodeCount); 0 without either.
	FleetNodes int
}
