package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultResolution is the resolution NewCoarse uses when given zero or a
// negative one: 1ms.
const DefaultResolution = time.Millisecond

// Coarse is a cached monotonic clock: one background goroutine copies
// System's reading into an atomic word every resolution, and Now just loads
// that word. A reading is one atomic load, shared read-only by every core,
// instead of a call into the runtime's clock.
//
// # Precision
//
// A Coarse reading is a System reading taken at most one resolution ago
// (more if the ticking goroutine is descheduled), so it is never ahead of
// System: for every instant, Coarse.Now() ≤ System().Now(). Readings never
// go backwards. The cost is lag, and what lag does to a store depends on
// the window you look at:
//
//   - Over the long run a store on a Coarse clock never admits more than
//     the limit: time, as it sees it, has advanced no further than real
//     time, so by real time t after the store was created it has admitted
//     at most Burst + Rate·(t + lag)/Per tokens, where lag is how far the
//     reading taken at creation was behind.
//   - Over a short window it can admit up to Rate·lag/Per tokens more than
//     the exact clock would: two requests a moment apart in real time can
//     read instants up to one lag apart (the first just before a tick, the
//     second just after it). Over any real interval of length T the bound is
//     Burst + Rate·(T + lag)/Per rather than Burst + Rate·T/Per. With the
//     default 1ms resolution and a limit of one token per second or slower,
//     that is at most one extra token in any window, and only at a tick.
//   - Requests within one tick see the same instant, so no refill happens
//     between them: a key that was just emptied stays empty until the next
//     tick, up to one resolution longer than with the exact clock.
//
// So a Coarse clock suits limits whose token interval is much longer than
// its resolution; for a limit of one token per 100µs, use System.
//
// A Coarse clock is safe for concurrent use. Create one with NewCoarse and
// stop its goroutine with Close; after Close, Now keeps returning the last
// reading.
type Coarse struct {
	now  atomic.Int64
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ Clock = (*Coarse)(nil)

// NewCoarse starts a coarse clock that refreshes its reading every
// resolution (DefaultResolution, 1ms, if resolution ≤ 0). Its readings
// share System's origin. Call Close to stop it.
func NewCoarse(resolution time.Duration) *Coarse {
	if resolution <= 0 {
		resolution = DefaultResolution
	}
	c := &Coarse{stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(int64(system.Now()))
	go c.tick(time.NewTicker(resolution))
	return c
}

// tick refreshes the reading on every tick of t until Close.
func (c *Coarse) tick(t *time.Ticker) {
	defer close(c.done)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.now.Store(int64(system.Now()))
		case <-c.stop:
			return
		}
	}
}

// Now returns the most recent cached reading of System: never ahead of
// System().Now(), and at most about one resolution behind it.
func (c *Coarse) Now() time.Duration { return time.Duration(c.now.Load()) }

// Close stops the clock's goroutine and waits for it to exit. Now keeps
// working, frozen at the last reading. Close may be called more than once,
// and on a Coarse that NewCoarse did not make (the zero value, which has
// no goroutine and reads 0).
func (c *Coarse) Close() {
	if c.done == nil {
		return // not from NewCoarse: no goroutine to stop
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
