package conformance

import (
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate/clock"
)

// HookClock is a manual clock that runs a function right after one chosen
// reading, on the goroutine that took it: the tool for driving a store
// through one interleaving every run. A store's call that reads the clock
// and then acts on the reading is interrupted exactly between the two, as
// if another goroutine had run there (net/http drives its races the same
// way with test hooks).
type HookClock struct {
	*clock.Manual
	hook atomic.Pointer[func()]
}

// NewHookClock returns a HookClock reading start.
func NewHookClock(start time.Duration) *HookClock {
	return &HookClock{Manual: clock.NewManual(start)}
}

// Now returns the manual clock's reading, then runs the function armed by
// AtNextReading, if any: once, and before returning, so that the caller
// acts on a reading that the function's effects postdate.
func (c *HookClock) Now() time.Duration {
	v := c.Manual.Now()
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return v
}

// AtNextReading arms f to run right after the next reading of the clock,
// by whichever goroutine takes it. Readings that f takes itself do not run
// it again. Arm it only where that reading is taken outside the store's
// locks (the first reading of a call): f runs under whatever the reader
// holds, and a Sweep there would wait for a lock its own caller holds.
func (c *HookClock) AtNextReading(f func()) { c.hook.Store(&f) }

// Fired reports whether the armed function has run.
func (c *HookClock) Fired() bool { return c.hook.Load() == nil }
