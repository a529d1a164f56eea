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

// Failing tests of bugs found by an adversarial review of redisbucket:
// each says what the bug is, and passes once it is fixed.

// TestLeaseHolderDelaysOthers: a request on a hot key whose lease is
// being taken (the lease's EVALSHA held in flight by a hook) must not be
// held up by it beyond its own bounds (its context and the store's
// timeout, 2s here). leases.allow (lease.go) holds the key's lease.mu
// across the lease's round trip, and every other request on the key
// blocks on that mutex, with no regard for its context or the timeout:
// on a hung server N concurrent requests on a hot key queue behind one
// another, the last returning after N timeouts; here the second request
// returns only when the held one is let go.
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

// panicHook makes the client fail, or panic on, the next EVALSHA when
// armed.
type panicHook struct {
	fail, panics atomic.Bool
}

func (h *panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			if h.fail.Swap(false) {
				cmd.SetErr(errors.New("injected failure"))
				return cmd.Err()
			}
			if h.panics.Swap(false) {
				panic("a hook's panic")
			}
		}
		return next(ctx, cmd)
	}
}

func (h *panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBreakerProbePanics: when the client panics on the breaker's probe
// (a hook's panic, which the store lets unwind the caller, as
// TestPipelinePanic's leader), the breaker must still let a later call
// probe. Store.run (store.go) calls breaker.exit only when send returns,
// so a probe that panics leaves the breaker in stProbing for good: every
// later call is refused (ErrCircuitOpen) without being sent, forever,
// with Redis answering.
func TestBreakerProbePanics(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := &panicHook{}
	client.AddHook(hook)
	clk := clock.NewManual(0)
	s := mustNew(t, client, keyrate.PerHour(100), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithBreaker(redisbucket.Breaker{Failures: 1, Backoff: time.Second, Clock: clk}))
	if d, err := s.AllowN("k", 1); err != nil || !d.Allowed {
		t.Fatalf("AllowN = %+v, %v; want allowed", d, err)
	}
	hook.fail.Store(true)
	if _, err := s.AllowN("k", 1); !errors.Is(err, redisbucket.ErrUnavailable) {
		t.Fatalf("AllowN with the call failing: %v; want ErrUnavailable", err)
	}
	if !s.Stats().BreakerOpen {
		t.Fatalf("the breaker of 1 failure did not open: %+v", s.Stats())
	}
	clk.Advance(time.Second)
	hook.panics.Store(true)
	func() {
		defer func() {
			if r := recover(); r != "a hook's panic" {
				t.Fatalf("the probe recovered %v; want the hook's panic", r)
			}
		}()
		_, _ = s.AllowN("k", 1)
	}()
	clk.Advance(time.Hour) // past any back-off
	for i := range 3 {
		d, err := s.AllowN("k", 1)
		if err == nil && d.Allowed {
			return // a probe went through and Redis answered
		}
		if i == 2 {
			t.Fatalf("3 calls an hour after a probe panicked, Redis up: the last %+v, %v; Stats %+v: the breaker never probes again",
				d, err, s.Stats())
		}
	}
}

// TestNilContext: a nil context is context.Background() for every
// method that takes one, as it is for Wait (and Reservation.Wait), never
// a panic (common.md: bad input never panics, typed nils included).
// AllowNContext, AllowTierContext, PeekContext, RefundContext,
// RefundTierContext, ReserveContext, ReserveTierContext and LenContext
// call ctx.Err() or ctx.Done() on it and panic with a nil dereference.
func TestNilContext(t *testing.T) {
	s := mustNew(t, newClient(t, server(t).Addr()), keyrate.PerHour(100), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout))
	var nilCtx context.Context
	calls := []struct {
		name string
		f    func() error
	}{
		{"AllowNContext", func() error { _, err := s.AllowNContext(nilCtx, "k", 1); return err }},
		{"AllowTierContext", func() error { _, err := s.AllowTierContext(nilCtx, "k", keyrate.Tier{}, 1); return err }},
		{"PeekContext", func() error { _, err := s.PeekContext(nilCtx, "k"); return err }},
		{"RefundContext", func() error { return s.RefundContext(nilCtx, "k", 1) }},
		{"RefundTierContext", func() error { return s.RefundTierContext(nilCtx, "k", keyrate.Tier{}, 1) }},
		{"ReserveContext", func() error { _, err := s.ReserveContext(nilCtx, "k", 1, time.Second); return err }},
		{"ReserveTierContext", func() error {
			_, err := s.ReserveTierContext(nilCtx, "k", keyrate.Tier{}, 1, time.Second)
			return err
		}},
		{"LenContext", func() error { _, err := s.LenContext(nilCtx); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil context, ...) panicked: %v", c.name, r)
				}
			}()
			if err := c.f(); err != nil {
				t.Errorf("%s(nil context, ...) = %v; want it served as with context.Background()", c.name, err)
			}
		})
	}
	if err := s.Wait(nilCtx, "k", 1); err != nil { // as documented
		t.Errorf("Wait(nil context) = %v", err)
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
// timeout, retries included (doc.go), but with WithLeases one AllowN can
// make up to three round trips, each bounded by a timeout of its own
// (Store.send derives a fresh deadline per round trip): the refund of an
// expired lease's unused tokens (leases.giveBack), the next lease, and,
// if Redis denies the lease, the request alone. Here a request on a hot
// key whose lease expired with a token left, on a server that hangs (a
// hook holds each EVALSHA to its deadline), sends the refund and then the
// lease, the lease's deadline a full timeout after the refund's: the call
// takes twice the timeout.
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
