package clock

import (
	"sync/atomic"
	"time"
)

// Manual is a clock that moves only when told to, for tests and for replaying
// recorded traffic. Its zero value reads 0. It is safe for concurrent use:
// Advance and Set may be called while other goroutines read Now.
//
// Unlike a real monotonic clock, a Manual clock may be set backwards, so that
// tests can check how a store treats a stale reading.
type Manual struct {
	now atomic.Int64
}

// NewManual returns a manual clock that reads start.
func NewManual(start time.Duration) *Manual {
	m := new(Manual)
	m.now.Store(int64(start))
	return m
}

// Now returns the clock's current reading.
func (m *Manual) Now() time.Duration { return time.Duration(m.now.Load()) }

// Advance moves the clock by d, which may be negative, and returns the new
// reading.
func (m *Manual) Advance(d time.Duration) time.Duration {
	return time.Duration(m.now.Add(int64(d)))
}

// Set moves the clock to t, forwards or backwards.
func (m *Manual) Set(t time.Duration) { m.now.Store(int64(t)) }
