package ratelimitsvc

import (
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// alignEvery is the length every origin of a windowClock is a multiple
// of, since the Unix epoch: 210 days, the least common multiple of a
// second, a minute, an hour, a day, a week (7 days) and a month (30 days)
// as envoyproxy/ratelimit counts them. (A year of 365 days would make it
// 42 years, and put the origin too far back for keyrate's clock range.)
const alignEvery = 210 * 24 * time.Hour

// windowClock is a monotonic clock whose readings count from origin, the
// latest multiple of alignEvery since the Unix epoch before it was made,
// except that it reads 0 until started: a store built on it takes 0 as
// its epoch, so that its windows start where envoyproxy/ratelimit's do.
type windowClock struct {
	start  time.Time     // when it was made (with a monotonic reading)
	offset time.Duration // start's distance from the origin
	live   atomic.Bool
}

func newWindowClock(now time.Time) *windowClock {
	unix := time.Duration(now.UnixNano())
	return &windowClock{start: now, offset: unix % alignEvery}
}

// Now returns the time since the origin: 0 before it is started.
func (c *windowClock) Now() time.Duration {
	if !c.live.Load() {
		return 0
	}
	return c.offset + time.Since(c.start)
}

// NewLocalStore returns an in-process store (atomicbucket) for a Service,
// and the clock to give the Service (WithClock). Its windows are aligned
// as envoyproxy/ratelimit's: a window of a second, a minute, an hour, a
// day, a week or a month starts at every multiple of its length since the
// Unix epoch, so that a minute's limit resets at the top of the minute,
// and Envoy and its clients see the reset where they expect it; a year's
// window (365 days) starts at multiples of 365 days from the latest
// multiple of 210 days since the epoch before the store was made. The
// clock is monotonic from then on: a later step of the wall clock moves
// no window. opts are the store's options (keyrate.WithMaxKeys and the
// like); a keyrate.WithClock among them is overridden.
func NewLocalStore(opts ...keyrate.Option) (*atomicbucket.Store, clock.Clock, error) {
	c := newWindowClock(time.Now())
	// The default policy is never used: the Service decides under the
	// policies of its rules only.
	s, err := atomicbucket.New(keyrate.PerSecond(1), append(opts, keyrate.WithClock(c))...)
	if err != nil {
		return nil, nil, err
	}
	c.live.Store(true)
	return s, c, nil
}
