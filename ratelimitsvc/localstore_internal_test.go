package ratelimitsvc

import (
	"testing"
	"time"
)

// TestWindowClockAligned: a window clock reads 0 until started (the
// store's epoch), then the time since an origin that is a multiple of
// every unit but the year since the Unix epoch, so that each unit's
// windows start where envoyproxy/ratelimit's do.
func TestWindowClockAligned(t *testing.T) {
	now := time.Unix(1_800_000_123, 456_789)
	c := newWindowClock(now)
	if r := c.Now(); r != 0 {
		t.Fatalf("before start: %v", r)
	}
	unix := time.Duration(now.UnixNano())
	for _, u := range []Unit{1, 2, 3, 4, 5, 7} { // second .. month, week
		w := UnitDuration(u)
		if c.offset%w != unix%w {
			t.Errorf("%v: the clock is %v into its window, the Unix time %v", u, c.offset%w, unix%w)
		}
	}
	c = newWindowClock(time.Now())
	c.live.Store(true)
	if r := c.Now(); r < c.offset || r > c.offset+time.Hour {
		t.Fatalf("after start: %v, offset %v", r, c.offset)
	}
}
