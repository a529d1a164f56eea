package eventmetrics

import (
	"sync/atomic"

	"github.com/keyrate/keyrate"
)

// Counts are the counts of one policy label value's events, which the
// exporters turn into their metrics: the decisions allowed and denied,
// the denials that shadow mode let through, the cost allowed, the answers
// of a failure policy (Degraded events), and the calls that ended in an
// error, by kind. The zero Counts counts nothing yet; it is safe for
// concurrent use.
type Counts struct {
	Allowed, Denied                 atomic.Uint64
	ShadowDenied                    atomic.Uint64
	Cost                            atomic.Uint64 // the cost allowed
	DegradedAllowed, DegradedDenied atomic.Uint64
	Errors                          [NumErrorKinds]atomic.Uint64
}

// Add counts e: a degraded event in DegradedAllowed or DegradedDenied,
// and then an event with an error in Errors only (whatever its Allowed),
// an allowed one in Allowed and its cost, if positive, in Cost, and any
// other in Denied, and also in ShadowDenied if it is a shadow-mode one.
// It is at most three atomic adds.
func (c *Counts) Add(e keyrate.Event) {
	if e.Degraded {
		if e.Allowed {
			c.DegradedAllowed.Add(1)
		} else {
			c.DegradedDenied.Add(1)
		}
	}
	switch {
	case e.Err != nil:
		c.Errors[KindOf(e.Err)].Add(1)
	case e.Allowed:
		c.Allowed.Add(1)
		if e.Cost > 0 {
			c.Cost.Add(uint64(e.Cost))
		}
	default:
		c.Denied.Add(1)
		if e.Shadow {
			c.ShadowDenied.Add(1)
		}
	}
}
