package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/redisbucket"
)

// commandLog is a go-redis hook that records the name of every command a
// client sends, pipelines included.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.add(cmds...)
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cmds {
		l.names = append(l.names, c.Name())
	}
}

// since returns the commands sent since the log held n.
func (l *commandLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names[n:]...)
}

func (l *commandLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

// wantCommands fails t unless the log holds exactly want since it held n.
func wantCommands(t *testing.T, log *commandLog, n int, what string, want ...string) {
	t.Helper()
	if got := log.since(n); !slices.Equal(got, want) {
		t.Fatalf("%s sent %v; want %v", what, got, want)
	}
}

// TestWaitErrors: Wait fails at once, spending nothing and sending
// nothing, for a cost no wait allows, an invalid key or a done context;
// for a wait past the context's deadline it fails after the one call that
// tells, with an error matching both keyrate.ErrWaitExceedsDeadline and
// context.DeadlineExceeded, having spent nothing.
func TestWaitErrors(t *testing.T) {
	client := newClient(t, server(t).Addr())
	clk := clock.NewManual(unixStart)
	s := openWait(t, client, keyrate.PerSecond(1).WithBurst(2), clk, keyrate.WithPolicies(keyrate.Unlimited("free")))
	ctx := t.Context()
	s.Allow("k")
	before := s.Peek("k")
	calls := s.Stats().Calls
	if err := s.Wait(ctx, "k", 3); !errors.Is(err, keyrate.ErrCostExceedsBurst) {
		t.Fatalf("Wait(3) with burst 2: %v, want ErrCostExceedsBurst", err)
	}
	if err := s.Wait(ctx, "k", 0); !errors.Is(err, keyrate.ErrInvalidCost) {
		t.Fatalf("Wait(0): %v, want ErrInvalidCost", err)
	}
	if err := s.Wait(ctx, "", 1); !errors.Is(err, keyrate.ErrInvalidKey) {
		t.Fatalf("Wait on the empty key: %v, want ErrInvalidKey", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Wait(done, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.ReserveContext(done, "k", 1, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReserveContext with a cancelled context: %v, want context.Canceled", err)
	}
	if n := s.Stats().Calls - calls; n != 0 {
		t.Fatalf("the failed Waits made %d calls to Redis, want none", n)
	}
	// The wait for 2 tokens is 1s of the time source; the deadline is 1ms
	// of real time away, or already past when the call is sent: either
	// way the error is context.DeadlineExceeded.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := s.Wait(short, "k", 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past a 1ms deadline: %v, want an error matching context.DeadlineExceeded", err)
	}
	// A wait of 2h with an hour left: ErrWaitExceedsDeadline, at once.
	hour, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	slow := openWait(t, client, keyrate.Limit{Rate: 1, Per: 2 * time.Hour, Burst: 2}, clk)
	slow.Allow("k")
	err := slow.Wait(hour, "k", 2)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, keyrate.ErrWaitExceedsDeadline) || hour.Err() != nil {
		t.Fatalf("Wait of 2h with an hour to the deadline: %v, want ErrWaitExceedsDeadline matching context.DeadlineExceeded, at once", err)
	}
	if d := slow.Peek("k"); d.Remaining != 1 {
		t.Fatalf("the refused Wait spent: Peek = %+v, want 1 token left", d)
	}
	if after := s.Peek("k"); after != before {
		t.Fatalf("failed Waits spent: Peek %+v before, %+v after", before, after)
	}
	var nilCtx context.Context
	if err := s.Wait(nilCtx, "k", 1); err != nil {
		t.Fatalf("Wait(nil context) with a token there: %v, want nil", err)
	}
	other := openWait(t, client, keyrate.PerSecond(1).WithBurst(2), clk, keyrate.WithPolicies(keyrate.Unlimited("free")))
	foreign, _ := other.Tier("free")
	if err := s.WaitTier(ctx, "k", foreign, 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
		t.Fatalf("WaitTier with another store's tier: %v, want ErrUnknownPolicy", err)
	}
	free, _ := s.Tier("free")
	calls = s.Stats().Calls
	if err := s.WaitTier(ctx, "k", free, 1000); err != nil {
		t.Fatalf("WaitTier under an unlimited policy: %v, want nil", err)
	}
	if r, err := s.ReserveTier("k", free, 5, 0); err != nil || !r.OK() || r.Delay() != 0 || r.Cancel() {
		t.Fatalf("ReserveTier under an unlimited policy = OK %v, Delay %v, %v (or its Cancel gave something back)", r.OK(), r.Delay(), err)
	}
	if n := s.Stats().Calls - calls; n != 0 {
		t.Fatalf("an unlimited policy's Wait and Reserve made %d calls to Redis, want none", n)
	}
}

// TestWaitRoundTrips: a Wait is one EVALSHA, whether it sleeps or not,
// and sends nothing while it sleeps on the time source; a Wait cancelled
// while it sleeps sends one more, its Cancel, which gives the tokens
// back, so that the next waiter gets its slot.
func TestWaitRoundTrips(t *testing.T) {
	var log commandLog
	client := newClient(t, server(t).Addr())
	client.AddHook(&log)
	clk := clock.NewManual(unixStart)
	s := openWait(t, client, keyrate.PerSecond(1).WithBurst(1), clk)
	ctx := t.Context()
	s.Allow("warm-up") // loads the script: EVALSHA, NOSCRIPT, EVAL

	n := log.len()
	if err := s.Wait(ctx, "k", 1); err != nil {
		t.Fatalf("Wait with the token there: %v", err)
	}
	wantCommands(t, &log, n, "a Wait that need not sleep", "evalsha")

	n = log.len()
	errc := make(chan error, 1)
	go func() { errc <- s.Wait(ctx, "k", 1) }()
	if err := clk.AwaitSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantCommands(t, &log, n, "a Wait asleep for its slot", "evalsha")
	clk.Advance(999 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("Wait returned %v 1ms before its slot", err)
	default:
	}
	clk.Advance(time.Millisecond)
	if err := <-errc; err != nil {
		t.Fatalf("Wait at its slot: %v", err)
	}
	wantCommands(t, &log, n, "a Wait that slept a second", "evalsha")

	n = log.len()
	cctx, cancel := context.WithCancel(ctx)
	go func() { errc <- s.Wait(cctx, "k", 1) }()
	if err := clk.AwaitSleepers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled while sleeping: %v, want context.Canceled", err)
	}
	if n := clk.Sleepers(); n != 0 {
		t.Fatalf("%d sleepers left after the cancelled Wait returned", n)
	}
	wantCommands(t, &log, n, "a Wait cancelled while sleeping", "evalsha", "evalsha")
	wantReservation(t, "Reserve after the cancelled Wait", mustReserve(t, s, "k", 1, time.Hour), true, time.Second)
}

// TestWaitOrder: waiters on one key, from two stores (two processes),
// return in the order they reserved, each at its slot.
func TestWaitOrder(t *testing.T) {
	const waiters = 6
	srv := server(t)
	clk := clock.NewManual(unixStart)
	prefix := uniquePrefix(t)
	var stores [2]*redisbucket.Store
	for i := range stores {
		stores[i] = mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(1).WithBurst(1), redisbucket.WithTimeSource(clk),
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	}
	stores[0].Allow("k")
	type ret struct {
		i  int
		at time.Duration
	}
	rets := make(chan ret, waiters)
	ctx := t.Context()
	for i := range waiters {
		go func() {
			if err := stores[i%2].Wait(ctx, "k", 1); err != nil {
				t.Error(err)
			}
			rets <- ret{i, clk.Now()}
		}()
		if err := clk.AwaitSleepers(ctx, i+1); err != nil { // i reserved before i+1 starts
			t.Fatal(err)
		}
	}
	for want := range waiters {
		if _, ok := clk.Step(); !ok {
			t.Fatalf("no sleeper for waiter %d", want)
		}
		got := <-rets
		if at := unixStart + time.Duration(want+1)*time.Second; got.i != want || got.at != at {
			t.Fatalf("return %d: waiter %d at +%v; want waiter %d at +%v", want, got.i, got.at-unixStart, want, at-unixStart)
		}
	}
}

// TestWaitFailurePolicies: while Redis is unreachable, FailClosed's
// Reserve and Wait return an error wrapping ErrUnavailable; FailOpen's
// reserve with no delay and wait for nothing; FallbackLocal's are the
// fallback store's, which sleep on the time source and cancel in the
// fallback. A cancel Redis does not answer gives nothing back.
func TestWaitFailurePolicies(t *testing.T) {
	open := func(t *testing.T, p redisbucket.FailurePolicy, opts ...keyrate.Option) (*redisbucket.Store, *clock.Manual) {
		clk := clock.NewManual(unixStart)
		return mustNew(t, newClient(t, unreachable), keyrate.PerSecond(1).WithBurst(5), append([]keyrate.Option{
			redisbucket.WithFailurePolicy(p), redisbucket.WithTimeSource(clk), redisbucket.WithTimeout(faultTimeout),
			redisbucket.WithEvictionAllowed(), redisbucket.WithPrefix(uniquePrefix(t)),
		}, opts...)...), clk
	}
	ctx := t.Context()
	t.Run("FailClosed", func(t *testing.T) {
		s, _ := open(t, redisbucket.FailClosed)
		if r, err := s.Reserve("k", 1, time.Hour); !errors.Is(err, redisbucket.ErrUnavailable) || r.OK() {
			t.Errorf("Reserve = OK %v, %v; want ErrUnavailable", r.OK(), err)
		}
		if err := s.Wait(ctx, "k", 1); !errors.Is(err, redisbucket.ErrUnavailable) {
			t.Errorf("Wait = %v; want ErrUnavailable", err)
		}
		if st := s.Stats(); st.Calls != 2 || st.Errors != 2 || st.Degraded != 2 {
			t.Errorf("Stats = %+v; want 2 calls, 2 errors, 2 degraded", st)
		}
	})
	t.Run("FailOpen", func(t *testing.T) {
		s, clk := open(t, redisbucket.FailOpen)
		r, err := s.Reserve("k", 5, time.Hour)
		if err != nil || !r.OK() || r.Delay() != 0 || r.At() != clk.Now() || r.Cancel() {
			t.Errorf("Reserve = OK %v, delay %v, at +%v, %v (or its Cancel gave back); want OK at once, now", r.OK(), r.Delay(), r.At()-unixStart, err)
		}
		for range 3 {
			if err := s.Wait(ctx, "k", 5); err != nil {
				t.Errorf("Wait = %v; want nil at once", err)
			}
		}
	})
	t.Run("FallbackLocal", func(t *testing.T) {
		s, clk := open(t, redisbucket.FallbackLocal, redisbucket.WithFallbackLimit(keyrate.PerSecond(1).WithBurst(2)))
		if err := s.Wait(ctx, "k", 2); err != nil {
			t.Fatalf("Wait(2) on the fallback's full bucket: %v", err)
		}
		r, err := s.Reserve("k", 1, time.Hour)
		if err != nil || !r.OK() || r.Delay() != time.Second {
			t.Fatalf("Reserve = OK %v, delay %v, %v; want the fallback's slot a second away", r.OK(), r.Delay(), err)
		}
		if !r.Cancel() {
			t.Fatal("Cancel of the fallback's latest reservation gave nothing back")
		}
		if !s.Cancel(mustReserve(t, s, "k", 1, time.Hour)) {
			t.Fatal("the store's Cancel of the fallback's latest reservation gave nothing back")
		}
		errc := make(chan error, 1)
		go func() { errc <- s.Wait(ctx, "k", 2) }()
		if err := clk.AwaitSleepers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		if err := <-errc; err != nil {
			t.Fatalf("Wait(2) on the fallback at its slot: %v", err)
		}
		if _, err := s.Reserve("k", 3, time.Hour); !errors.Is(err, redisbucket.ErrUnavailable) || !errors.Is(err, keyrate.ErrCostExceedsBurst) {
			t.Fatalf("Reserve(3) above the fallback's burst: %v; want ErrUnavailable and the fallback's ErrCostExceedsBurst", err)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		// A reservation made while Redis answered, cancelled while it
		// does not: nothing is given back, and the error says why.
		srv := server(t)
		clk := clock.NewManual(unixStart)
		for _, p := range []redisbucket.FailurePolicy{redisbucket.FailClosed, redisbucket.FailOpen, redisbucket.FallbackLocal} {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
			s := openWait(t, client, keyrate.PerSecond(1).WithBurst(1), clk, redisbucket.WithFailurePolicy(p))
			s.Allow("k")
			r := mustReserve(t, s, "k", 1, time.Hour)
			_ = client.Close()
			if ok, err := s.CancelContext(ctx, r); ok || !errors.Is(err, redisbucket.ErrUnavailable) {
				t.Errorf("%v: CancelContext with the client closed = %v, %v; want false, ErrUnavailable", p, ok, err)
			}
		}
	})
}

// TestReserveServerTime: under the server's TIME, a reservation's slot is
// a reading of clock.System(), its delay what the server computed (a
// little less than the hour the bucket takes to refill, by the time the
// calls take), and the latest reservation cancels.
func TestReserveServerTime(t *testing.T) {
	client := newClient(t, server(t).Addr())
	for _, p := range []keyrate.Policy{
		{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerHour(1)}},
		{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerHour(1), {Rate: 7, Per: 3 * time.Hour, Burst: 3}}},
	} {
		t.Run(fmt.Sprint("windows=", len(p.Limits)), func(t *testing.T) {
			s := mustNew(t, client, keyrate.PerHour(1), keyrate.WithPolicies(p), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
			s.Allow("k")
			near := func(r keyrate.Reservation) bool {
				return r.OK() && r.Delay() > 59*time.Minute && r.Delay() <= time.Hour && rules.ReservationRules(r).Clock() == clock.System() &&
					r.At()-clock.System().Now() > 59*time.Minute
			}
			for i := range 3 {
				r := mustReserve(t, s, "k", 1, 2*time.Hour)
				if !near(r) {
					t.Fatalf("Reserve %d = OK %v, delay %v, at %v from now; want about an hour on clock.System()", i, r.OK(), r.Delay(), r.At()-clock.System().Now())
				}
				if !r.Cancel() {
					t.Fatalf("Cancel %d of the latest reservation, an hour before its slot, gave nothing back", i)
				}
			}
			a, b := mustReserve(t, s, "k", 1, 3*time.Hour), mustReserve(t, s, "k", 1, 3*time.Hour)
			if !near(a) || b.Delay() <= time.Hour || a.Cancel() || !b.Cancel() || !a.Cancel() {
				t.Fatalf("two reservations (delays %v, %v): want the second cancelled first, then the first", a.Delay(), b.Delay())
			}
		})
	}
}

// TestConcurrentReservations: goroutines of two stores (two processes)
// reserve with random costs and waits on one key, and cancel their latest
// reservations, while the clock stands; between rounds it moves. The
// reservations left standing keep the token bucket's bound at their slots
// (checkBound), and the rounds reserve up to what the limit allows.
func TestConcurrentReservations(t *testing.T) {
	srv := server(t)
	for _, limit := range []keyrate.Limit{keyrate.PerSecond(1000).WithBurst(1), keyrate.PerSecond(1000).WithBurst(20)} {
		t.Run(fmt.Sprint("burst=", limit.Burst), func(t *testing.T) {
			clk := clock.NewManual(unixStart)
			prefix := uniquePrefix(t)
			var stores [2]*redisbucket.Store
			for i := range stores {
				stores[i] = mustNew(t, newClient(t, srv.Addr()), limit, redisbucket.WithTimeSource(clk),
					redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
			}
			const goroutines, rounds, ops = 8, 10, 30
			var kept []conformance.Admission
			rng := rand.New(rand.NewPCG(3, 4))
			for range rounds {
				kept = append(kept, conformance.ReserveAndCancel(t, []keyrate.WaitLimiter{stores[0], stores[1]}, limit, goroutines, ops, rng.Uint64())...)
				clk.Advance(time.Duration(rng.IntN(50_000)) * time.Microsecond)
			}
			total, lo, hi := 0, kept[0].At, kept[0].At
			for _, a := range kept {
				total += a.Cost
				lo, hi = min(lo, a.At), max(hi, a.At)
			}
			conformance.CheckBound(t, limit, kept)
			if total < limit.Burst {
				t.Fatalf("the reservations kept hold %d tokens, fewer than one burst: nothing was tested", total)
			}
			t.Logf("%d reservations kept, %d tokens, slots over %v", len(kept), total, hi-lo)
		})
	}
}
