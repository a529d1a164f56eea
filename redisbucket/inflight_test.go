package redisbucket_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// newInflight returns a fleet-wide limit of n slots per key held for
// lease, on c, under a prefix of its own.
func newInflight(t testing.TB, c redis.UniversalClient, n int, lease time.Duration, opts ...keyrate.Option) (*redisbucket.InflightStore, error) {
	t.Helper()
	s := mustNew(t, c, keyrate.PerSecond(1), append([]keyrate.Option{redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}, opts...)...)
	return s.Inflight("inflight-"+uniquePrefix(t), n, lease)
}

// TestInflightConformance: the concurrency-limit suite on a real
// redis-server, a Redis Cluster of three masters (keys hash-tagged) and a
// Ring, each acquire and release a round trip.
func TestInflightConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			var opts []keyrate.Option
			if b.name == "cluster" {
				opts = append(opts, redisbucket.WithHashTag())
			}
			conformance.RunInflight(t, func(t *testing.T, n int) (inflight.Limiter, string, error) {
				l, err := newInflight(t, c, n, time.Minute, opts...)
				return l, "", err
			})
		})
	}
}

// TestInflightLeaseExpires: a holder that never releases (a dead
// process) frees its slot when its lease ends, and not before, on the
// store's time source.
func TestInflightLeaseExpires(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(time.Duration(time.Now().UnixNano()))
	l, err := newInflight(t, newClient(t, srv.Addr()), 2, 10*time.Second, redisbucket.WithTimeSource(clk))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if s, err := l.TryAcquire("k"); err != nil || !s.Acquired() {
			t.Fatalf("acquire %d: %v, %v", i, s.Acquired(), err)
		}
		clk.Advance(time.Second) // the second lease ends a second after the first
	}
	clk.Advance(8*time.Second - time.Microsecond) // 1µs before the first lease ends
	if s, _ := l.TryAcquire("k"); s.Acquired() {
		t.Fatal("a slot was given before any lease ended")
	}
	clk.Advance(time.Microsecond)
	s, err := l.TryAcquire("k")
	if err != nil || !s.Acquired() {
		t.Fatalf("after the first lease ended: %v, %v; want a slot", s.Acquired(), err)
	}
	if s2, _ := l.TryAcquire("k"); s2.Acquired() {
		t.Error("the second holder's lease was dropped with the first's")
	}
	s.Release()
	if s3, _ := l.TryAcquire("k"); !s3.Acquired() {
		t.Error("a release did not free the slot")
	}
}

// TestInflightFailurePolicies: with Redis gone, FailClosed gives no slot
// and ErrUnavailable, FailOpen a slot that holds nothing, FallbackLocal a
// slot of an in-process limit of the same size; each failure is counted
// and reported.
func TestInflightFailurePolicies(t *testing.T) {
	for _, p := range []redisbucket.FailurePolicy{redisbucket.FailClosed, redisbucket.FailOpen, redisbucket.FallbackLocal} {
		t.Run(p.String(), func(t *testing.T) {
			srv := server(t)
			var reported int
			c := newClient(t, srv.Addr())
			s := mustNew(t, c, keyrate.PerSecond(1), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithFailurePolicy(p),
				redisbucket.WithTimeout(slowTimeout), redisbucket.WithOnError(func(error) { reported++ }))
			l, err := s.Inflight("inflight-"+uniquePrefix(t), 1, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			held, err := l.TryAcquire("k")
			if err != nil || !held.Acquired() {
				t.Fatalf("before the kill: %v, %v", held.Acquired(), err)
			}
			srv.Kill()
			a, err := l.TryAcquire("k")
			switch p {
			case redisbucket.FailClosed:
				if a.Acquired() || !errors.Is(err, redisbucket.ErrUnavailable) {
					t.Errorf("FailClosed: %v, %v; want no slot and ErrUnavailable", a.Acquired(), err)
				}
			case redisbucket.FailOpen:
				if !a.Acquired() || err != nil {
					t.Errorf("FailOpen: %v, %v; want a slot", a.Acquired(), err)
				}
			case redisbucket.FallbackLocal:
				b, _ := l.TryAcquire("k")
				if !a.Acquired() || err != nil || b.Acquired() {
					t.Errorf("FallbackLocal: %v, %v, then %v; want a slot, then none (the local limit of 1)", a.Acquired(), err, b.Acquired())
				}
			}
			a.Release()
			held.Release() // fails: reported, not panicking
			if st := s.Stats(); st.Degraded == 0 || st.Errors == 0 || reported < 2 {
				t.Errorf("Stats %+v, %d reported; want the failures counted and reported", st, reported)
			}
		})
	}
}

// TestInflightBreaker: once the breaker opens, an acquire sends nothing
// and fails with ErrCircuitOpen.
func TestInflightBreaker(t *testing.T) {
	srv := server(t)
	c := newClient(t, srv.Addr())
	s := mustNew(t, c, keyrate.PerSecond(1), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout),
		redisbucket.WithBreaker(redisbucket.Breaker{Failures: 2, Backoff: time.Hour}))
	l, err := s.Inflight("inflight-"+uniquePrefix(t), 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for range 2 {
		l.TryAcquire("k")
	}
	calls := s.Stats().Calls
	if _, err := l.TryAcquire("k"); !errors.Is(err, redisbucket.ErrCircuitOpen) {
		t.Errorf("after 2 failures: %v, want ErrCircuitOpen", err)
	}
	if got := s.Stats().Calls; got != calls {
		t.Errorf("the open breaker sent a call (%d calls, was %d)", got, calls)
	}
}

// TestInflightBadConfig: a lease or prefix out of range is an error
// wrapping keyrate.ErrInvalidOption, sending nothing.
func TestInflightBadConfig(t *testing.T) {
	srv := server(t)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(1), redisbucket.WithPrefix("rl:"), redisbucket.WithHashTag())
	for _, c := range []struct {
		prefix string
		lease  time.Duration
	}{
		{"in:", 0}, {"in:", -time.Second}, {"in:", redisbucket.MinInflightLease - 1}, {"in:", redisbucket.MaxInflightLease + 1},
		{"", time.Minute}, {"rl:inflight:", time.Minute}, {"rl", time.Minute}, {"in{x}:", time.Minute},
	} {
		if _, err := s.Inflight(c.prefix, 1, c.lease); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("Inflight(%q, 1, %v): %v, want ErrInvalidOption", c.prefix, c.lease, err)
		}
	}
	if _, err := s.Inflight("in:", 1, time.Minute); err != nil {
		t.Errorf("a valid limit: %v", err)
	}
	if _, err := s.Inflight("in:", 0, time.Minute); !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Errorf("limit 0: %v, want ErrInvalidLimit", err)
	}
}

// TestInflightReserved: with 1 of 2 slots reserved fleet-wide, an
// ordinary acquire stops at 1 and one whose context is marked critical
// takes the second; a reserve outside [0, n) is an error.
func TestInflightReserved(t *testing.T) {
	srv := server(t)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(1), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	l, err := s.Inflight("inflight-"+uniquePrefix(t), 2, time.Minute, inflight.WithReserved(1))
	if err != nil {
		t.Fatal(err)
	}
	crit := inflight.Critical(context.Background())
	a, err := l.TryAcquire("k")
	if err != nil || !a.Acquired() {
		t.Fatalf("ordinary 1: %v, %v", a.Acquired(), err)
	}
	if b, err := l.TryAcquire("k"); err != nil || b.Acquired() {
		t.Fatalf("ordinary 2 (the reserve): %v, %v; want refused", b.Acquired(), err)
	}
	c, err := l.TryAcquireContext(crit, "k")
	if err != nil || !c.Acquired() {
		t.Fatalf("critical 2: %v, %v; want the reserved slot", c.Acquired(), err)
	}
	if d, _ := l.TryAcquireContext(crit, "k"); d.Acquired() {
		t.Fatal("critical 3: a slot past the limit")
	}
	a.Release()
	c.Release()
	if _, err := s.Inflight("inflight-"+uniquePrefix(t), 2, time.Minute, inflight.WithReserved(2)); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Errorf("WithReserved(2) of 2: %v, want ErrInvalidOption", err)
	}
}

// lostReplyHook runs the next EVALSHA (or EVAL) and then, when armed,
// drops its reply: it returns lose's error, as a client does whose
// caller gave up, or whose read timed out, after Redis ran the script.
type lostReplyHook struct {
	mu   sync.Mutex
	lose func() error // nil: disarmed
}

func (h *lostReplyHook) arm(lose func() error) {
	h.mu.Lock()
	h.lose = lose
	h.mu.Unlock()
}

func (h *lostReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lostReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); err != nil || (n != "evalsha" && n != "eval") {
			return err
		}
		h.mu.Lock()
		lose := h.lose
		h.lose = nil
		h.mu.Unlock()
		if lose == nil {
			return nil
		}
		err = lose()
		cmd.SetErr(err)
		return err
	}
}

func (h *lostReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestInflightLostReplyFreesSlot: an acquire whose script ran in Redis
// but whose reply never came back (its caller gave up: an HTTP client
// that disconnected; or the read timed out) got no slot, so no one will
// release the holder the script added: the acquire must remove it, or
// the key keeps a slot held by no one for the whole lease (here an hour:
// a limit of 1 would refuse everyone for that hour).
func TestInflightLostReplyFreesSlot(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name   string
		policy redisbucket.FailurePolicy
		lose   func(cancel context.CancelFunc) error
	}{
		{"cancelled", redisbucket.FailClosed, func(cancel context.CancelFunc) error { cancel(); return context.Canceled }},
		{"timeout/FailClosed", redisbucket.FailClosed, func(context.CancelFunc) error { return readTimeout }},
		{"timeout/FailOpen", redisbucket.FailOpen, func(context.CancelFunc) error { return readTimeout }},
		{"timeout/FallbackLocal", redisbucket.FallbackLocal, func(context.CancelFunc) error { return readTimeout }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newClient(t, server(t).Addr())
			hook := &lostReplyHook{}
			cl.AddHook(hook)
			s := mustNew(t, cl, keyrate.PerSecond(1), redisbucket.WithPrefix(uniquePrefix(t)),
				redisbucket.WithTimeout(slowTimeout), redisbucket.WithFailurePolicy(c.policy))
			l, err := s.Inflight("inflight-"+uniquePrefix(t), 1, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hook.arm(func() error { return c.lose(cancel) })
			lost, err := l.TryAcquireContext(ctx, "k")
			t.Logf("the acquire whose reply was lost: %v, %v", lost.Acquired(), err)
			lost.Release() // FailOpen's and FallbackLocal's slots: not the one in Redis
			s2, err := l.TryAcquire("k")
			if err != nil || !s2.Acquired() {
				t.Fatalf("after an acquire whose reply was lost: %v, %v; want a slot (the lost one's holder removed)", s2.Acquired(), err)
			}
			if s3, _ := l.TryAcquire("k"); s3.Acquired() {
				t.Error("a second slot of a limit of 1")
			}
		})
	}
}

// TestInflightReleaseAfterLease: a holder whose lease ended (a process
// that stalled past it) and whose slot another took must not free that
// other's slot when it finally releases; nor may it twice.
func TestInflightReleaseAfterLease(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(time.Duration(time.Now().UnixNano()))
	l, err := newInflight(t, newClient(t, srv.Addr()), 1, time.Second, redisbucket.WithTimeSource(clk))
	if err != nil {
		t.Fatal(err)
	}
	stale, err := l.TryAcquire("k")
	if err != nil || !stale.Acquired() {
		t.Fatalf("first: %v, %v", stale.Acquired(), err)
	}
	clk.Advance(time.Second) // the lease ends
	cur, err := l.TryAcquire("k")
	if err != nil || !cur.Acquired() {
		t.Fatalf("after the lease ended: %v, %v; want the slot", cur.Acquired(), err)
	}
	stale.Release()
	stale.Release()
	if s, _ := l.TryAcquire("k"); s.Acquired() {
		t.Fatal("the expired holder's release freed the current holder's slot")
	}
	cur.Release()
	if s, _ := l.TryAcquire("k"); !s.Acquired() {
		t.Fatal("the current holder's release did not free its slot")
	}
}
