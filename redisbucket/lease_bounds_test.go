package redisbucket_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// Bounds on a request under WithLeases: one timeout for its wait and its
// round trips together, however many requests on a hot key a hung
// server holds up.

// TestLeaseHolderDelaysOthers: a request on a hot key whose lease is
// being taken (the lease's EVALSHA held in flight by a hook) must not be
// held up by it beyond its own bounds (its context and the store's
// timeout, 2s here): it waits for the lease on its own context and
// timeout (leases.allow), so that on a hung server N concurrent requests
// on a hot key do not queue behind one another, the last returning after
// N timeouts, as they did when the lease's mutex was held across its
// round trip.
func TestLeaseHolderDelaysOthers(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(20), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(2*time.Second), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithLeases(redisbucket.Lease{Size: 2, Life: time.Second}))
	// The first request makes the key known, the second (hot: the clock
	// is frozen) takes a lease of 2 and uses one, the third uses the other.
	for i := range 3 {
		if d, err := s.AllowN("hot", 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want allowed", i, d, err)
		}
	}
	if st := s.Stats(); st.Leases != 1 || st.Leased != 2 {
		t.Fatalf("after 3 requests, Stats %+v; want 1 lease that answered 2", st)
	}
	open := hook.armCall()
	held := goAllow(t.Context(), s, "hot") // the lease is spent: it takes another, held
	<-hook.entered
	other := goAllow(t.Context(), s, "hot")
	select {
	case o := <-other:
		if o.err != nil && !errors.Is(o.err, redisbucket.ErrUnavailable) {
			t.Errorf("the other request: %+v, %v", o.d, o.err)
		}
	case <-time.After(heldFor):
		t.Errorf("a request on a hot key waited %v, past its timeout of 2s, for another request's lease round trip", heldFor)
	}
	open()
	// Held past its timeout if the other waited: then it fails as an outage.
	if o := within(t, "the held request", held); (o.err != nil || !o.d.Allowed) && !errors.Is(o.err, redisbucket.ErrUnavailable) {
		t.Errorf("the held request: %+v, %v; want allowed, or ErrUnavailable", o.d, o.err)
	}
}

// deadlineHook records the deadline of every EVALSHA's context and, when
// hang is set, holds each until that deadline, as a hung server would.
type deadlineHook struct {
	hang      atomic.Bool
	mu        sync.Mutex
	deadlines []time.Time
}

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			d, _ := ctx.Deadline()
			h.mu.Lock()
			h.deadlines = append(h.deadlines, d)
			h.mu.Unlock()
			if h.hang.Load() {
				<-ctx.Done()
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaseCallBoundedByOneTimeout: every call is bounded by the store's
// timeout, retries included (doc.go), and so is one AllowN under
// WithLeases that makes up to three round trips (the refund of an
// expired lease's unused tokens, the next lease, and, if Redis denies the
// lease, the request alone): they share one deadline (callCtx). Here a
// request on a hot key whose lease expired with a token left, on a server
// that hangs (a hook holds each EVALSHA to its deadline), sends the
// refund and then the lease, both with the deadline of the first; with a
// deadline each, the call took twice the timeout.
func TestLeaseCallBoundedByOneTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	client := newClient(t, server(t).Addr())
	hook := &deadlineHook{}
	client.AddHook(hook)
	clk := clock.NewManual(start)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(20), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(timeout), redisbucket.WithTimeSource(clk),
		redisbucket.WithLeases(redisbucket.Lease{Size: 3, Life: time.Second}))
	allow := func(what string) {
		t.Helper()
		if d, err := s.AllowN("hot", 1); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v; want allowed", what, d, err)
		}
	}
	allow("the first request")  // the key is known
	allow("the second request") // hot: a lease of 3, 2 left
	clk.Advance(600 * time.Millisecond)
	allow("a request from the lease") // 1 left
	if st := s.Stats(); st.Leases != 1 || st.Leased != 2 {
		t.Fatalf("Stats %+v; want 1 lease that answered 2", st)
	}
	clk.Advance(600 * time.Millisecond) // hot still; the lease has ended with a token left
	hook.mu.Lock()
	hook.deadlines = nil
	hook.mu.Unlock()
	hook.hang.Store(true)
	d, err := s.AllowN("hot", 1)
	hook.hang.Store(false)
	if d.Allowed || !errors.Is(err, redisbucket.ErrUnavailable) {
		t.Fatalf("AllowN on a hung server: %+v, %v; want FailClosed's answer", d, err)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.deadlines) == 0 {
		t.Fatal("the request sent nothing")
	}
	first, last := hook.deadlines[0], hook.deadlines[len(hook.deadlines)-1]
	if spread := last.Sub(first); spread > timeout/2 {
		t.Errorf("one AllowN sent %d round trips whose deadlines span %v: it is bounded by %d timeouts of %v, not one",
			len(hook.deadlines), spread, len(hook.deadlines), timeout)
	}
}
