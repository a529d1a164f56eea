package redisbucket

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlines gives each call a context that ends at its timeout, more
// cheaply than context.WithTimeout: a call whose context is never
// cancelled (context.Background(), as Allow and AllowN use, or any context
// whose Done is nil) gets a timeoutCtx, one allocation, whose Done channel
// it shares with every call whose deadline falls in the same short span (a
// slot). context.WithTimeout costs five allocations and a timer per call.
//
// A slot's channel closes at the slot's end, which is at or after each of
// its calls' deadlines and at most the store's granularity after (the
// smaller of timeout/8 and 1ms). Deadline reports each call's own
// deadline, exactly: it is what bounds go-redis's socket reads and writes
// (ContextTimeoutEnabled), so a reply is never awaited past it; only what
// selects on Done (a wait for a free connection in the pool, a back-off
// between retries) can run up to the granularity past it.
type deadlines struct {
	timeout time.Duration
	gran    time.Duration
	cur     atomic.Pointer[slot] // the latest slot
	mu      sync.Mutex           // serialises making a slot
}

// slot is one shared Done channel, closed at end.
type slot struct {
	end  time.Time
	done chan struct{}
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, gran: max(min(timeout/8, time.Millisecond), 1)}
}

// fits reports whether sl may serve a call with deadline d: it ends at or
// after d, and at most the granularity after.
func (ds *deadlines) fits(sl *slot, d time.Time) bool {
	return sl != nil && !sl.end.Before(d) && sl.end.Sub(d) <= ds.gran
}

// slotFor returns a slot that fits deadline d, making one if the latest
// does not.
func (ds *deadlines) slotFor(d time.Time) *slot {
	if sl := ds.cur.Load(); ds.fits(sl, d) {
		return sl
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if sl := ds.cur.Load(); ds.fits(sl, d) {
		return sl
	}
	sl := &slot{end: d.Add(ds.gran), done: make(chan struct{})}
	time.AfterFunc(time.Until(sl.end), func() { close(sl.done) })
	ds.cur.Store(sl)
	return sl
}

// with returns parent bounded by the store's timeout (a callCtx's by the
// timeout of its call), and the function that releases it.
func (ds *deadlines) with(parent context.Context) (context.Context, context.CancelFunc) {
	var d time.Time
	if c, ok := parent.(*callCtx); ok && c.ds == ds {
		d, parent = c.until, c.Context
	} else {
		d = time.Now().Add(ds.timeout)
	}
	if parent.Done() != nil {
		return context.WithDeadline(parent, d)
	}
	return &timeoutCtx{Context: parent, deadline: d, slot: ds.slotFor(d)}, func() {}
}

// callCtx is the caller's context for a call that makes several round
// trips (a request on a hot key under WithLeases: the refund of an ended
// lease, the next lease, the request alone), so that one timeout bounds
// them all, as it bounds a call of one: each round trip ends by until,
// the call's first round trip's start plus the store's timeout (see
// deadlines.with). It is the caller's context in every other way: its
// Done and Err are the caller's, so that a round trip the timeout ends
// is an outage, not the caller giving up.
type callCtx struct {
	context.Context // the caller's
	until           time.Time
	ds              *deadlines // the store's whose timeout bounds the call
}

// newCallCtx returns ctx as the context of a call whose round trips
// start now, bounded by ds's timeout.
func newCallCtx(ctx context.Context, ds *deadlines) *callCtx {
	return &callCtx{Context: ctx, until: time.Now().Add(ds.timeout), ds: ds}
}

// wait waits until done is closed, and returns nil; or, if the caller's
// context ends first, its error; or, if the call's timeout passes first,
// nil (what comes next fails on that timeout, as an outage).
func (c *callCtx) wait(done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(c.until))
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-c.Done():
		return c.Err()
	case <-t.C:
		return nil
	}
}

// timeoutCtx is a context that is never cancelled but ends at its
// deadline: Done is its slot's channel, and Err is
// context.DeadlineExceeded once that is closed. Values are the parent's.
type timeoutCtx struct {
	context.Context // the parent, whose Done is nil
	deadline        time.Time
	slot            *slot
}

func (c *timeoutCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *timeoutCtx) Done() <-chan struct{} { return c.slot.done }

func (c *timeoutCtx) Err() error {
	select {
	case <-c.slot.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// deadlineOf returns ctx's deadline: every call's context has one.
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// orBackground returns ctx, or context.Background() for a nil ctx: every
// method that takes a context treats nil as Background, as Wait does.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
