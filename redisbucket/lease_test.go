package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestLeaseFrozen: a fleet of 4 nodes × 8 goroutines with leases on one
// key, time frozen (the time source and the leases' clock): leases of a
// second lower the burst of 20 by the 10 tokens a second refills, so the
// fleet admits exactly 10, every lease's tokens handed out.
func TestLeaseFrozen(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(start)
	prefix := uniquePrefix(t)
	stores := make([]*redisbucket.Store, nodes)
	fleet := make([]allowFunc, nodes)
	for i := range fleet {
		stores[i] = mustNew(t, newClient(t, srv.Addr()), fleetLimit, redisbucket.WithPrefix(prefix),
			redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clk),
			redisbucket.WithLeases(redisbucket.Lease{Size: 3, Life: time.Second}))
		fleet[i] = func(ctx context.Context, key string, _ int) (bool, error) {
			d, err := stores[i].AllowNContext(ctx, key, 1)
			return d.Allowed, err
		}
	}
	got := runFleet(t, fleet, "shared", func(call int) bool { return call >= frozenCalls })
	var leases uint64
	for _, s := range stores {
		leases += s.Stats().Leases
	}
	if want := int64(fleetLimit.Burst - 10); got != want || leases == 0 {
		t.Fatalf("the fleet admitted %d with %d leases, time frozen; want exactly %d, leases taken", got, leases, want)
	}
	if l := stores[0].Limit(); l.Burst != fleetLimit.Burst-10 {
		t.Fatalf("Limit() = %v; want the burst lowered by 10", l)
	}
}

// TestLeaseServerTime: the fleet with leases hammers one key for about a
// second on the server's clock and admits at most Burst + Rate·T/Per,
// leases taken.
func TestLeaseServerTime(t *testing.T) {
	srv := server(t)
	limit := keyrate.PerSecond(100).WithBurst(50)
	prefix := uniquePrefix(t)
	stores := make([]*redisbucket.Store, nodes)
	fleet := make([]allowFunc, nodes)
	for i := range fleet {
		stores[i] = mustNew(t, newClient(t, srv.Addr()), limit, redisbucket.WithPrefix(prefix),
			redisbucket.WithTimeout(slowTimeout), redisbucket.WithLeases(redisbucket.Lease{Size: 10, Life: 50 * time.Millisecond}))
		fleet[i] = func(ctx context.Context, key string, _ int) (bool, error) {
			d, err := stores[i].AllowNContext(ctx, key, 1)
			return d.Allowed, err
		}
	}
	const run = time.Second
	begin := time.Now()
	got := runFleet(t, fleet, "shared", func(call int) bool { return call > 0 && time.Since(begin) >= run })
	elapsed := time.Since(begin)
	bound := int64(limit.Burst) + int64(elapsed)*int64(limit.Rate)/int64(limit.Per)
	var leases uint64
	for _, s := range stores {
		leases += s.Stats().Leases
	}
	t.Logf("admitted %d over %v (bound %d) with %d leases", got, elapsed, bound, leases)
	if got > bound {
		t.Fatalf("the fleet admitted %d over %v, above the bound %d", got, elapsed, bound)
	}
	if leases == 0 {
		t.Fatal("no lease was taken on a key 32 goroutines hammer")
	}
}

// TestLeaseRoundTrips: on a hot key a lease of 10 answers 10 requests with
// one call; when it ends its unused tokens go back (one refund) before the
// next lease; a key requested once in a Life gets no lease.
func TestLeaseRoundTrips(t *testing.T) {
	var log commandLog
	srv := server(t)
	client := newClient(t, srv.Addr())
	client.AddHook(&log)
	clk := clock.NewManual(start)
	limit := keyrate.PerSecond(1).WithBurst(100)
	prefix := redisbucket.WithPrefix(uniquePrefix(t))
	s := mustNew(t, client, limit, prefix, redisbucket.WithTimeSource(clk), redisbucket.WithTimeout(slowTimeout),
		redisbucket.WithLeases(redisbucket.Lease{Size: 10, Life: time.Second}))
	// The same buckets without leases, under the lowered burst (100 less
	// the 1 token a second refills); its calls are not logged.
	plain := mustNew(t, newClient(t, srv.Addr()), limit.WithBurst(99), prefix,
		redisbucket.WithTimeSource(clk), redisbucket.WithTimeout(slowTimeout))
	s.Allow("warm")
	n := log.len()
	s.Allow("k") // not hot yet: a plain call
	for i := range 10 {
		if d, err := s.AllowN("k", 1); err != nil || !d.Allowed || d.Remaining != 9-i {
			t.Fatalf("request %d on the hot key: %+v, %v; want allowed with %d left in the lease", i, d, err, 9-i)
		}
	}
	if c := evalCount(&log, n); c != 2 {
		t.Fatalf("11 requests, 10 from one lease, sent %d calls; want 2", c)
	}
	if d := plain.Peek("k"); d.Remaining != 99-11 {
		t.Fatalf("after a request and a lease of 10: %d left; want %d", d.Remaining, 99-11)
	}
	clk.Advance(500 * time.Millisecond)
	n = log.len()
	s.Allow("k") // a new lease: the last one is spent
	s.Allow("k")
	clk.Advance(time.Second) // the lease ends with 8 unused
	before := plain.Peek("k").Remaining
	s.Allow("k") // gives 8 back; not hot (a second since): a plain call
	if c := evalCount(&log, n); c != 3 {
		t.Fatalf("a lease, a request from it, then a refund and a plain call sent %d calls; want 3", c)
	}
	// The refund of 8, less the plain call's 1.
	if got := plain.Peek("k").Remaining; got != before+8-1 {
		t.Fatalf("after the lease ended: %d left; want %d (its 8 unused tokens back, 1 spent)", got, before+8-1)
	}
}

// BenchmarkHotKey: nodes stores (each its own client) × perNode
// goroutines on one key that the limit never denies, without and with
// leases (op=allow/leases=off|on); allows/s is the fleet's throughput.
func BenchmarkHotKey(b *testing.B) {
	racetest.Bench()
	srv := server(b)
	limit := keyrate.PerSecond(1_000_000).WithBurst(1_000_000)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("op=allow/leases=%v", on), func(b *testing.B) {
			prefix := redisbucket.WithPrefix(uniquePrefix(b))
			opts := []keyrate.Option{prefix, redisbucket.WithTimeout(time.Second)}
			if on {
				opts = append(opts, redisbucket.WithLeases(redisbucket.Lease{Size: 100, Life: 10 * time.Millisecond}))
			}
			stores := make([]*redisbucket.Store, nodes)
			for i := range stores {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
				b.Cleanup(func() { _ = c.Close() })
				stores[i] = mustNew(b, c, limit, opts...)
				stores[i].Allow("warm")
			}
			b.ReportAllocs()
			var denied atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			begin := time.Now()
			for g := range nodes * perNode {
				n := b.N / (nodes * perNode)
				if g < b.N%(nodes*perNode) {
					n++
				}
				s := stores[g%nodes]
				wg.Go(func() {
					for range n {
						if d, err := s.AllowN("hot", 1); err != nil || !d.Allowed {
							denied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(begin)
			b.StopTimer()
			if denied.Load() != 0 {
				b.Fatalf("%d calls denied or failed: the limit should allow every call", denied.Load())
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "allows/s")
			var calls uint64
			for _, s := range stores {
				calls += s.Stats().Calls
			}
			b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
		})
	}
}

// TestLeaseOptions: WithLeases's fields out of range are
// keyrate.ErrInvalidOption; a Life in which a window refills its whole
// Burst is keyrate.ErrInvalidLimit (ErrInvalidPolicy for a policy's).
func TestLeaseOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	for _, c := range []struct {
		limit keyrate.Limit
		opts  []keyrate.Option
		want  error
	}{
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 0, Life: time.Second})}, keyrate.ErrInvalidOption},
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: 0})}, keyrate.ErrInvalidOption},
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: 2 * time.Minute})}, keyrate.ErrInvalidOption},
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: time.Second, Keys: -1})}, keyrate.ErrInvalidOption},
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: time.Second, Clock: (*clock.Manual)(nil)})}, keyrate.ErrInvalidOption},
		{keyrate.PerSecond(10).WithBurst(10), []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: time.Second})}, keyrate.ErrInvalidLimit},
		{faultLimit, []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 1, Life: time.Second}),
			keyrate.WithPolicies(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerSecond(100).WithBurst(50)}})}, keyrate.ErrInvalidPolicy},
	} {
		if _, err := redisbucket.New(client, c.limit, append(c.opts, redisbucket.WithEvictionAllowed())...); !errors.Is(err, c.want) {
			t.Errorf("New(%v, ...): %v; want %v", c.limit, err, c.want)
		}
	}
}

// TestLeaseSlackNeeded is why WithLeases lowers the Burst: tokens spent in
// Redis before they are served, but served up to a Life later, can land
// beside the tokens the window refilled meanwhile. Under 10/s with a
// burst of 10 and no slack, a lease of 10 taken at 0 and served at 1s,
// while another process spends each token as it refills, puts 11
// admissions at the instant 1s: above Burst + Rate·0/Per = 10.
func TestLeaseSlackNeeded(t *testing.T) {
	client := newClient(t, server(t).Addr())
	clk := clock.NewManual(start)
	limit := keyrate.PerSecond(10).WithBurst(10)
	s := openWait(t, client, limit, clk) // Redis's accounting, no slack
	if d, err := s.AllowN("k", 10); err != nil || !d.Allowed {
		t.Fatalf("the lease of 10 at 0: %+v, %v", d, err)
	}
	at1s := 10 // the lease's tokens, served at 1s
	for step := 1; step <= 10; step++ {
		clk.Advance(100 * time.Millisecond)
		d, err := s.AllowN("k", 1) // another process, as each token refills
		if err != nil || !d.Allowed {
			t.Fatalf("the token refilled at %v: %+v, %v", time.Duration(step)*100*time.Millisecond, d, err)
		}
		if step == 10 {
			at1s++
		}
	}
	if at1s <= limit.Burst {
		t.Fatalf("%d admissions at 1s; the counter-example needs more than the burst %d", at1s, limit.Burst)
	}
	t.Logf("%d admissions at the instant 1s without the slack; the bound is %d", at1s, limit.Burst)
}

// TestLeaseWaiters: a request on a hot key whose lease another request is
// taking (its EVALSHA held in flight by a hook) waits for it and is served
// from the new lease, with no round trip of its own; one whose context
// ends (before its wait or during it: the test cannot tell which) returns
// at once with the context's error, and the lease still serves the next. (TestLeaseHolderDelaysOthers: one whose
// timeout ends first returns by it.)
func TestLeaseWaiters(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	clk := clock.NewManual(start)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(20), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clk),
		redisbucket.WithLeases(redisbucket.Lease{Size: 5, Life: time.Second}))
	if d, err := s.AllowN("hot", 1); err != nil || !d.Allowed { // the key is known, not yet hot
		t.Fatalf("the first request: %+v, %v; want allowed", d, err)
	}
	calls := s.Stats().Calls
	open := hook.armCall()
	taker := goAllow(t.Context(), s, "hot") // hot: takes a lease of 5, held
	<-hook.entered
	served := goAllow(t.Context(), s, "hot")
	ctx, cancel := context.WithCancel(t.Context())
	leaving := goAllow(ctx, s, "hot")
	cancel()
	if o := within(t, "the request whose context ended", leaving); !errors.Is(o.err, context.Canceled) || o.d.Allowed {
		t.Errorf("a waiting request whose context ended: %+v, %v; want context.Canceled, not allowed", o.d, o.err)
	}
	open()
	for what, ch := range map[string]<-chan outcome{"the lease's taker": taker, "the waiting request": served} {
		if o := within(t, what, ch); o.err != nil || !o.d.Allowed {
			t.Errorf("%s: %+v, %v; want allowed", what, o.d, o.err)
		}
	}
	if d, err := s.AllowN("hot", 1); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("the next request: %+v, %v; want allowed from the lease, 2 left", d, err)
	}
	if st := s.Stats(); st.Calls != calls+1 || st.Leases != 1 || st.Leased != 3 {
		t.Errorf("Stats %+v; want one call since the first request (the lease), answering 3 requests", st)
	}
}
