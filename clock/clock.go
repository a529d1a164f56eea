// Package clock provides the time sources keyrate's stores read: a cheap
// monotonic clock for production and a manual clock for tests and replay.
//
// Time is a time.Duration since an arbitrary fixed origin. Only differences
// between readings of one clock mean anything; a reading is never compared
// with the wall clock.
package clock

import "time"

// Clock is a source of monotonic time: Now returns the time elapsed since an
// arbitrary origin that is fixed for the life of the clock.
//
// Implementations must be safe for concurrent use. A Clock may go backwards
// (the Manual clock can, to test it); keyrate's stores treat a reading older
// than a bucket's state as that older instant, which can only deny more,
// never admit more.
type Clock interface {
	Now() time.Duration
}

// systemClock reads the runtime's monotonic clock through time.Since, which
// for a time.Time that carries a monotonic reading subtracts monotonic
// readings only and never reads the wall clock: about half the cost of
// time.Now on linux/amd64 (see BenchmarkClock).
type systemClock struct{ origin time.Time }

func (c systemClock) Now() time.Duration { return time.Since(c.origin) }

// system is shared by every caller of System; its origin is the moment this
// package was initialised, so readings start near zero.
var system Clock = systemClock{origin: time.Now()}

// System returns the default clock: monotonic time since the process
// started, unaffected by wall-clock steps (NTP, settimeofday). It is safe for
// concurrent use and allocates nothing.
func System() Clock { return system }
