package clock

import (
	"context"
	"time"
)

// Sleeper is a Clock whose readings can be waited for. Manual implements
// it, so that a test can fire the waits it starts (see Manual.Advance);
// for any other Clock, SleepUntil waits with a runtime timer.
type Sleeper interface {
	Clock
	// SleepUntil blocks until the clock reads t or later, returning nil,
	// or until ctx is done, returning ctx.Err(). It returns nil at once if
	// the clock reads t already, even if ctx is done. It never returns nil
	// before the clock reads t.
	SleepUntil(ctx context.Context, t time.Duration) error
}

// SleepUntil blocks until c reads t or later, returning nil, or until ctx
// is done, returning ctx.Err() (a nil ctx is context.Background(), a nil
// c, or a nil *Manual, is System()); it returns nil at once, creating no timer,
// if c reads t already. It never returns nil before c reads t: sleeping
// can only be late, never early.
//
// A Sleeper sleeps its own way. Any other clock is assumed to run at the
// rate of the runtime's clock, as System and Coarse do: SleepUntil sleeps
// on a runtime timer for the time left, then reads c again, and sleeps
// again for what is left if c is behind (a Coarse clock lags by up to its
// resolution).
func SleepUntil(ctx context.Context, c Clock, t time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c == nil || isNilManual(c) {
		c = System()
	}
	if s, ok := c.(Sleeper); ok {
		return s.SleepUntil(ctx, t)
	}
	d := t - c.Now()
	if d <= 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			if d = t - c.Now(); d <= 0 {
				return nil
			}
			timer.Reset(d)
		}
	}
}

// isNilManual reports whether c is a nil *Manual, whose methods would
// dereference it.
func isNilManual(c Clock) bool {
	m, ok := c.(*Manual)
	return ok && m == nil
}
