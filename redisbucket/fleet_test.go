package redisbucket_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// Fleet shape: nodes processes (separate clients and pools), each with
// perNode goroutines on one shared key.
const (
	nodes   = 4
	perNode = 8
)

// fleetLimit is tight enough that over-admission shows within a second:
// a burst of 20, then one token every 100ms.
var fleetLimit = keyrate.PerSecond(10).WithBurst(20)

// allowFunc is one node's limiter: it spends one token for key, or not.
// call counts the calling goroutine's calls from 0.
type allowFunc func(ctx context.Context, key string, call int) (bool, error)

// runFleet releases every node's goroutines together on key, each calling
// allow until done reports true (checked before each call), and returns
// the number admitted. A failed call fails t.
func runFleet(t *testing.T, fleet []allowFunc, key string, done func(call int) bool) int64 {
	t.Helper()
	var admitted atomic.Int64
	var ready, finished sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, len(fleet)*perNode)
	for _, allow := range fleet {
		for g := 0; g < perNode; g++ {
			ready.Add(1)
			finished.Add(1)
			go func() {
				defer finished.Done()
				ready.Done()
				<-release
				for call := 0; !done(call); call++ {
					ok, err := allow(t.Context(), key, call)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						admitted.Add(1)
					}
				}
			}()
		}
	}
	ready.Wait()
	close(release)
	finished.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed: %v", err)
	}
	return admitted.Load()
}

// storeFleet returns nodes Stores on addr sharing prefix, each with its
// own client.
func storeFleet(t *testing.T, addr, prefix string, opts ...keyrate.Option) []allowFunc {
	t.Helper()
	return clientFleet(t, func(t testing.TB) redis.UniversalClient { return newClient(t, addr) }, prefix, opts...)
}

// clientFleet returns nodes Stores sharing prefix, each with its own
// client from newClient.
func clientFleet(t *testing.T, newClient func(testing.TB) redis.UniversalClient, prefix string, opts ...keyrate.Option) []allowFunc {
	t.Helper()
	fleet := make([]allowFunc, nodes)
	for i := range fleet {
		s := mustNew(t, newClient(t), fleetLimit,
			append([]keyrate.Option{redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout)}, opts...)...)
		fleet[i] = func(ctx context.Context, key string, _ int) (bool, error) {
			d, err := s.AllowNContext(ctx, key, 1)
			return d.Allowed, err
		}
	}
	return fleet
}

// TestFleetServerTime: four nodes hammer one key for about a second on the
// server's clock and admit at most Burst + Rate·T/Per, T measured around
// the whole run; without and with the deny cache, and with leases, on one
// server and on a Redis Cluster.
func TestFleetServerTime(t *testing.T) {
	for _, b := range backends(t) {
		for _, c := range fleetOptions {
			t.Run("redis="+b.name+"/"+c.name, func(t *testing.T) { fleetServerTime(t, b.client, c.least, c.opts...) })
		}
	}
}

// fleetOptions are the stores' options of each run of the fleet tests:
// burst is what the fleet admits on a frozen clock, least the fewest it
// may admit in TestFleetServerTime.
var fleetOptions = []struct {
	name         string
	opts         []keyrate.Option
	burst, least int
}{
	{"plain", nil, fleetLimit.Burst, fleetLimit.Burst},
	{"deny-cache", []keyrate.Option{redisbucket.WithDenyCache(16)}, fleetLimit.Burst, fleetLimit.Burst},
	// Leases of 100ms lower the burst by the 1 token 100ms refills, and
	// each node may end holding a lease of 3 unused.
	{"leases", []keyrate.Option{redisbucket.WithLeases(redisbucket.Lease{Size: 3, Life: 100 * time.Millisecond})},
		fleetLimit.Burst - 1, fleetLimit.Burst - 1 - nodes*3},
	// One turn per node: a node's goroutines' calls go out in pipelines.
	{"pipelined", []keyrate.Option{redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1})}, fleetLimit.Burst, fleetLimit.Burst},
}

func fleetServerTime(t *testing.T, newClient func(testing.TB) redis.UniversalClient, least int, opts ...keyrate.Option) {
	fleet := clientFleet(t, newClient, uniquePrefix(t), opts...)
	const run = time.Second
	begin := time.Now()
	// Every goroutine makes at least one call, however late a busy machine
	// runs it, so that the fleet's 32 calls find the full burst of 20.
	got := runFleet(t, fleet, "shared", func(call int) bool { return call > 0 && time.Since(begin) >= run })
	elapsed := time.Since(begin)
	bound := int64(fleetLimit.Burst) + int64(elapsed)*int64(fleetLimit.Rate)/int64(fleetLimit.Per)
	t.Logf("admitted %d over %v (bound %d)", got, elapsed, bound)
	if got > bound {
		t.Fatalf("the fleet admitted %d over %v, above the bound %d", got, elapsed, bound)
	}
	if got < int64(least) {
		t.Fatalf("the fleet admitted %d, fewer than %d", got, least)
	}
}

// frozenCalls is how many calls each goroutine makes on a frozen clock.
const frozenCalls = 20

// TestFleetFrozen: with time frozen (an explicit time source shared by the
// fleet) the bound is exactly the burst, and the fleet admits exactly that,
// without and with the deny cache, and with leases (whose burst is lower),
// on one server and on a Redis Cluster.
func TestFleetFrozen(t *testing.T) {
	for _, b := range backends(t) {
		for _, c := range fleetOptions {
			t.Run("redis="+b.name+"/"+c.name, func(t *testing.T) {
				fleet := clientFleet(t, b.client, uniquePrefix(t), append(c.opts, redisbucket.WithTimeSource(clock.NewManual(start)))...)
				got := runFleet(t, fleet, "shared", func(call int) bool { return call >= frozenCalls })
				if got != int64(c.burst) {
					t.Fatalf("the fleet admitted %d with time frozen, want exactly the burst %d", got, c.burst)
				}
			})
		}
	}
}

// TestNaiveOverAdmits is the counter-example that shows the fleet tests can
// fail: the same limit done as GET, decide in Go, SET, on the same frozen
// schedule, admits more than the burst. To make that certain rather than
// likely, every goroutine's first call waits after its GET until all have
// read: the race window that any GET-then-SET has, held open.
func TestNaiveOverAdmits(t *testing.T) {
	srv := server(t)
	prefix := uniquePrefix(t)
	var read sync.WaitGroup
	read.Add(nodes * perNode)
	fleet := make([]allowFunc, nodes)
	for i := range fleet {
		client := newClient(t, srv.Addr())
		fleet[i] = func(ctx context.Context, key string, call int) (bool, error) {
			var hold func()
			if call == 0 {
				hold = func() { read.Done(); read.Wait() }
			}
			return naiveAllow(ctx, client, prefix+key, frozenMicros, hold)
		}
	}
	got := runFleet(t, fleet, "shared", func(call int) bool { return call >= frozenCalls })
	if want := int64(nodes * perNode); got < want {
		t.Fatalf("the naive fleet admitted %d, want at least %d: every goroutine's first call read the same full bucket", got, want)
	}
	t.Logf("the naive fleet admitted %d with time frozen; the burst is %d", got, fleetLimit.Burst)
}

// frozenMicros is the frozen time of the naive fleet, in µs.
const frozenMicros = int64(start / time.Microsecond)

// naiveAllow is GCRA done wrong: it reads the bucket's TAT (whole µs), decides
// in Go, and writes the new TAT, in three steps another client can
// interleave with. hold, unless nil, runs between the GET and the SET.
func naiveAllow(ctx context.Context, c *redis.Client, key string, now int64, hold func()) (bool, error) {
	interval := int64(fleetLimit.Per/time.Microsecond) / int64(fleetLimit.Rate)
	fill := int64(fleetLimit.Burst) * interval
	tat := now
	v, err := c.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return false, err
	default:
		if tat, err = strconv.ParseInt(v, 10, 64); err != nil {
			return false, err
		}
	}
	if hold != nil {
		hold()
	}
	next := max(tat, now) + interval
	if next-now > fill {
		return false, nil
	}
	return true, c.Set(ctx, key, next, 0).Err()
}

// TestFleetFallbackShare kills the server under a fleet of FallbackLocal
// stores, time frozen: with WithFallbackNodes(nodes) each node's fallback
// holds Burst/nodes, so the fleet admits exactly the burst; without it,
// each admits the whole burst, nodes times the limit (the counter-example
// that shows the test can fail).
func TestFleetFallbackShare(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []keyrate.Option
		want int64
	}{
		{"nodes=4", []keyrate.Option{redisbucket.WithFallbackNodes(nodes)}, int64(fleetLimit.Burst)},
		{"nodes=1", nil, int64(nodes * fleetLimit.Burst)},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := server(t)
			fleet := storeFleet(t, srv.Addr(), uniquePrefix(t), append(c.opts,
				redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
				redisbucket.WithTimeSource(clock.NewManual(start)),
				// Opens after the first failures and never probes: the
				// fallbacks answer at once.
				redisbucket.WithBreaker(redisbucket.Breaker{Clock: clock.NewManual(0)}))...)
			srv.Kill()
			got := runFleet(t, fleet, "shared", func(call int) bool { return call >= frozenCalls })
			if got != c.want {
				t.Fatalf("the fleet's fallbacks admitted %d with time frozen; want %d", got, c.want)
			}
		})
	}
}

// TestFleetNodeCount: three FallbackLocal stores with WithNodeCount count
// one another through Redis (on a manual clock: each announces itself at
// New, and again at each Every), divide their fallbacks' limits by 3, and
// keep that count after Close (which takes each out of the fleet's set)
// and through an outage: a killed server under the three, time frozen,
// admits 3·(Burst/3) = 18 of the burst of 20.
func TestFleetNodeCount(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(0)
	prefix := uniquePrefix(t)
	const n = 3
	stores := make([]*redisbucket.Store, n)
	for i := range stores {
		stores[i] = mustNew(t, newClient(t, srv.Addr()), fleetLimit,
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(time.Second),
			redisbucket.WithFailurePolicy(redisbucket.FallbackLocal),
			redisbucket.WithTimeSource(clock.NewManual(start)),
			redisbucket.WithBreaker(redisbucket.Breaker{Failures: 1, Clock: clock.NewManual(0)}),
			redisbucket.WithNodeCount(redisbucket.NodeCount{Every: time.Hour, Clock: clk}))
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	// Each has announced itself once (it sleeps until its next), seeing
	// those before it; a second round sees all three.
	if err := clk.AwaitSleepers(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if err := clk.AwaitSleepers(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		if got := s.Stats().FleetNodes; got != n {
			t.Fatalf("store %d counts %d nodes; want %d", i, got, n)
		}
	}
	for i, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatalf("store %d: Close = %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("store %d: a second Close = %v; want nil", i, err)
		}
	}
	if members, err := newClient(t, srv.Addr()).Exists(t.Context(), "{keyrate-nodes}"+prefix).Result(); err != nil || members != 0 {
		t.Fatalf("after every store's Close the fleet's set exists (%d, %v); want it gone", members, err)
	}
	srv.Kill()
	var admitted int
	for _, s := range stores {
		for range fleetLimit.Burst {
			if s.Allow("shared") {
				admitted++
			}
		}
	}
	if want := n * (fleetLimit.Burst / n); admitted != want {
		t.Fatalf("the fleet's fallbacks admitted %d with time frozen; want %d", admitted, want)
	}
}

// TestFallbackShareLongPer: a limit whose Per times the fleet's size
// overflows a Duration, 10 a year among WithFallbackNodes(1000), with the
// server killed and the clock stepped a month at a time over 10 years:
// one node's fallback admits 1, within its part of the documented bound,
// Burst/N + Rate·T/(N·Per) + 1 = 1.1 (the fleet's: (m/N)·(Burst +
// Rate·T/Per) + m), where a share of 1 a year admitted 11, and the
// fleet of 1000 so 11 000 (issue 31). A share that keyrate cannot hold
// (6 a year: a token every 166 years) is an error of New.
func TestFallbackShareLongPer(t *testing.T) {
	const year = 365 * 24 * time.Hour
	srv := server(t)
	clk := clock.NewManual(start)
	limit := keyrate.Limit{Rate: 10, Per: year, Burst: 10}
	s := mustNew(t, newClient(t, srv.Addr()), limit, redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackNodes(1000),
		redisbucket.WithTimeSource(clk), redisbucket.WithTimeout(faultTimeout),
		// Opens after the first failure and never probes: the fallback
		// answers at once.
		redisbucket.WithBreaker(redisbucket.Breaker{Failures: 1, Clock: clock.NewManual(0)}))
	srv.Kill()
	admitted := 0
	for month := 0; month <= 120; month++ {
		for range 3 {
			if d, err := s.AllowN("k", 1); err != nil {
				t.Fatal(err)
			} else if d.Allowed {
				admitted++
			}
		}
		clk.Advance(year / 12)
	}
	if admitted != 1 || s.Stats().Degraded != 121*3 {
		t.Fatalf("the fallback admitted %d over 10 years, %d answers degraded; want 1 (its share: 1 per 100 years, burst 1), all %d degraded", admitted, s.Stats().Degraded, 121*3)
	}
	_, err := redisbucket.New(newClient(t, srv.Addr()), keyrate.Limit{Rate: 6, Per: year, Burst: 6},
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackNodes(1000), redisbucket.WithEvictionAllowed())
	if !errors.Is(err, keyrate.ErrInvalidLimit) || !strings.Contains(err.Error(), "1000 fallback nodes") || !strings.Contains(err.Error(), "the most is") {
		t.Fatalf("New with 6 a year among 1000 fallback nodes: %v; want an error wrapping ErrInvalidLimit naming the limit, n and the bound", err)
	}
}

// TestFallbackShareOutOfRange: a policy whose share among the fallback
// nodes keyrate cannot hold (6 a year among 1000: a token every 166
// years) is refused by SetPolicy, which changes nothing; and when
// WithNodeCount's count puts a policy's share out of range, the fallback
// keeps the share it had and the error goes to OnError.
func TestFallbackShareOutOfRange(t *testing.T) {
	const year = 365 * 24 * time.Hour
	srv := server(t)
	client := newClient(t, srv.Addr())
	six := keyrate.Policy{Name: "six", Limits: []keyrate.Limit{{Rate: 6, Per: year, Burst: 6}}}
	s := mustNew(t, client, keyrate.PerSecond(10), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackNodes(1000))
	if err := s.SetPolicy(six); !errors.Is(err, keyrate.ErrInvalidPolicy) || !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Fatalf("SetPolicy(%v) among 1000 fallback nodes: %v; want an error wrapping ErrInvalidPolicy and ErrInvalidLimit", six, err)
	}
	for _, p := range s.Policies() {
		if p.Name == six.Name {
			t.Fatalf("SetPolicy failed, yet the store has %v", p)
		}
	}

	// Counted: this store, then 999 more members of its fleet's set.
	prefix := uniquePrefix(t)
	clk := clock.NewManual(0)
	var mu sync.Mutex
	var reported []error
	c := mustNew(t, client, keyrate.PerSecond(10), keyrate.WithPolicies(six), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout),
		redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithNodeCount(redisbucket.NodeCount{Every: time.Hour, Clock: clk}),
		redisbucket.WithOnError(func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, err)
		}))
	t.Cleanup(func() { _ = c.Close() })
	if err := clk.AwaitSleepers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	now, err := client.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	members := make([]redis.Z, 999)
	for i := range members {
		members[i] = redis.Z{Score: float64(now.UnixMilli()), Member: strconv.Itoa(i)}
	}
	if err := client.ZAdd(t.Context(), "{keyrate-nodes}"+prefix, members...).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if err := clk.AwaitSleepers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().FleetNodes; n != 1000 {
		t.Fatalf("FleetNodes = %d; want 1000", n)
	}
	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, err := range reported {
		found = found || errors.Is(err, keyrate.ErrInvalidLimit) && strings.Contains(err.Error(), `"six"`) && strings.Contains(err.Error(), "1000")
	}
	if !found {
		t.Fatalf("OnError got %v; want an error wrapping ErrInvalidLimit naming the policy and the count", reported)
	}
}
