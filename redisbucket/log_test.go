package redisbucket_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/redisbucket"
)

// logLimit returns a SlidingLog limit of n per w.
func logLimit(n int, w time.Duration) keyrate.Limit {
	return keyrate.Limit{Rate: n, Per: w}.Using(keyrate.SlidingLog)
}

// TestLogDifferential replays random schedules of spends (cost 1 to 3),
// peeks and refunds on three keys, time moving forward in whole µs steps
// of up to a third of the window (and now and then none), on a Store and
// on mutexbucket, the in-process log, with one Manual clock: every
// Decision is the same, field for field (Allowed, Remaining, RetryAfter,
// ResetAfter), with and without the deny cache, on one server and on a
// Redis Cluster.
func TestLogDifferential(t *testing.T) {
	for _, b := range backends(t) {
		client := b.client(t)
		for _, limit := range []keyrate.Limit{logLimit(1, time.Second), logLimit(5, 10*time.Millisecond), logLimit(12, 3*time.Second)} {
			for _, cache := range []bool{false, true} {
				t.Run(fmt.Sprintf("redis=%s/limit=%v/deny-cache=%v", b.name, limit, cache), func(t *testing.T) {
					clk := clock.NewManual(start)
					want, err := mutexbucket.New(limit, keyrate.WithClock(clk))
					if err != nil {
						t.Fatal(err)
					}
					opts := []keyrate.Option{redisbucket.WithTimeSource(clk),
						redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}
					if cache {
						opts = append(opts, redisbucket.WithDenyCache(16))
					}
					got := mustNew(t, client, limit, opts...)
					rng := rand.New(rand.NewPCG(2, uint64(limit.Rate)))
					at := time.Duration(0)
					allowed := 0
					for i := range 400 {
						if rng.IntN(3) > 0 {
							at += time.Duration(rng.Int64N(int64(limit.Per/3/time.Microsecond)+1)) * time.Microsecond
						}
						clk.Set(start + at)
						key := fmt.Sprint("k", rng.IntN(3))
						switch op := rng.IntN(8); {
						case op == 0:
							if g, w := got.Peek(key), want.Peek(key); g != w {
								t.Fatalf("op %d at +%v: Peek(%s) = %+v, want %+v", i, at, key, g, w)
							}
						case op == 1:
							cost := 1 + rng.IntN(min(limit.Rate, 3))
							gerr, werr := got.Refund(key, cost), want.Refund(key, cost)
							if gerr != nil || werr != nil {
								t.Fatalf("op %d at +%v: Refund(%s, %d) = %v; in process %v", i, at, key, cost, gerr, werr)
							}
						default:
							cost := 1 + rng.IntN(min(limit.Rate, 3))
							g, gerr := got.AllowN(key, cost)
							w, werr := want.AllowN(key, cost)
							if g != w || gerr != nil || werr != nil {
								t.Fatalf("op %d at +%v: AllowN(%s, %d) = %+v, %v; want %+v, %v", i, at, key, cost, g, gerr, w, werr)
							}
							if g.Allowed {
								allowed++
							}
						}
					}
					if allowed < 20 {
						t.Fatalf("only %d spends allowed: the schedule tests little", allowed)
					}
				})
			}
		}
	}
}

// TestLogBoundaries spends a burst of N + 1 (the last denied) at one µs,
// then requests at W − 1µs, W and W + 1µs after it (the last µs of the
// burst's window and the first two after it), each of cost 1 and 2,
// checked against conformance.LogModel field for field, and peeks; then
// a second admission's last and first µs. On one server and on a Redis
// Cluster.
func TestLogBoundaries(t *testing.T) {
	const w = 10 * time.Millisecond
	for _, b := range backends(t) {
		client := b.client(t)
		for _, burstAt := range []time.Duration{0, time.Microsecond, w / 2, w - time.Microsecond} {
			t.Run(fmt.Sprintf("redis=%s/burst-at=%v", b.name, burstAt), func(t *testing.T) {
				limit := logLimit(5, w)
				clk := clock.NewManual(start)
				s := mustNew(t, client, limit, redisbucket.WithTimeSource(clk),
					redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
				m := conformance.NewLogModel(limit)
				step := func(at time.Duration, cost int) {
					t.Helper()
					clk.Set(start + at)
					d, err := s.AllowN("k", cost)
					if err != nil {
						t.Fatal(err)
					}
					ok := m.Take(int64(at), int64(cost))
					sameAsModel(t, fmt.Sprintf("AllowN(%d) at +%v", cost, at), d, m.Decide(int64(at), int64(cost), ok))
				}
				step(burstAt, 3)
				step(burstAt+w/4, 1)
				step(burstAt+w/4, 1)
				step(burstAt+w/4, 1) // denied
				for _, at := range []time.Duration{burstAt + w - time.Microsecond, burstAt + w, burstAt + w + time.Microsecond,
					burstAt + w + w/4 - time.Microsecond, burstAt + w + w/4, burstAt + 2*w, burstAt + 3*w} {
					step(at, 1)
					step(at, 2)
					clk.Set(start + at)
					sameAsModel(t, fmt.Sprintf("Peek at +%v", at), s.Peek("k"), m.Decide(int64(at), 1, m.Allows(int64(at), 1)))
				}
			})
		}
	}
}

// TestLogFleet: four processes (each its own client), eight goroutines
// each, on one key of a log of 20 a minute, released at once on a time
// source frozen at +0, then at +W/2, +W − 1µs and +W: the fleet admits
// exactly what the model allows there (20, 0, 0, 20). On one server and
// on a Redis Cluster.
func TestLogFleet(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			limit := logLimit(20, time.Minute)
			clk := clock.NewManual(start)
			fleet := windowFleet(t, b.client, limit, uniquePrefix(t), redisbucket.WithTimeSource(clk))
			m := conformance.NewLogModel(limit)
			for _, at := range []time.Duration{0, limit.Per / 2, limit.Per - time.Microsecond, limit.Per} {
				clk.Set(start + at)
				want := m.Remaining(int64(at))
				got := runFleet(t, fleet, "shared", func(call int) bool { return call >= 5 })
				if got != want {
					t.Fatalf("at +%v the fleet admitted %d, want %d", at, got, want)
				}
				for range want {
					m.Take(int64(at), 1)
				}
			}
		})
	}
}

// TestLogFleetServerTime: the fleet of TestLogFleet on the server's
// clock, for about half a second, under a log of 20 per two seconds: the
// whole run lies within one window of the server's clock (its TIME read
// before and after it), so the fleet admits exactly 20.
func TestLogFleetServerTime(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			limit := logLimit(20, 2*time.Second)
			client := b.client(t)
			fleet := windowFleet(t, b.client, limit, uniquePrefix(t))
			before := serverTime(t, client)
			begin := time.Now()
			got := runFleet(t, fleet, "shared", func(call int) bool { return call > 0 && time.Since(begin) >= time.Second/2 })
			after := serverTime(t, client)
			if after-before >= limit.Per {
				t.Skipf("the run took %v of the server's clock, a window or more: nothing to check", after-before)
			}
			if got != int64(limit.Rate) {
				t.Fatalf("the fleet admitted %d within %v of the server's clock, want exactly %d", got, after-before, limit.Rate)
			}
		})
	}
}

// TestLogFleetSlidingServerTime: the fleet of TestLogFleet on the
// server's clock for about a second under a log of 10 per 200ms, each
// admission bracketed by the server's TIME read before and after its
// call: no N + 1 admissions fit within W of the server's clock (those
// whose brackets all lie within W, a sound check: it never fails a store
// that holds the limit, however slow the machine), and the fleet admits
// at least N.
func TestLogFleetSlidingServerTime(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			limit := logLimit(10, 200*time.Millisecond)
			timer := b.client(t)
			type bracket struct{ before, after time.Duration }
			var mu sync.Mutex
			var admitted []bracket
			now := func(ctx context.Context) (time.Duration, error) {
				tm, err := timer.Time(ctx).Result()
				return time.Duration(tm.UnixMicro()) * time.Microsecond, err
			}
			prefix := uniquePrefix(t)
			fleet := make([]allowFunc, nodes)
			for i := range fleet {
				s := mustNew(t, b.client(t), limit, redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
				fleet[i] = func(ctx context.Context, key string, _ int) (bool, error) {
					before, err := now(ctx)
					if err != nil {
						return false, err
					}
					d, err := s.AllowNContext(ctx, key, 1)
					if err != nil || !d.Allowed {
						return false, err
					}
					after, err := now(ctx)
					if err != nil {
						return false, err
					}
					mu.Lock()
					admitted = append(admitted, bracket{before, after})
					mu.Unlock()
					return true, nil
				}
			}
			begin := time.Now()
			runFleet(t, fleet, "shared", func(call int) bool { return call > 0 && time.Since(begin) >= time.Second })
			slices.SortFunc(admitted, func(x, y bracket) int { return cmp.Compare(x.before, y.before) })
			for i, a := range admitted {
				in := 0
				for _, c := range admitted[i:] {
					if c.after < a.before+limit.Per {
						in++
					}
				}
				if in > limit.Rate {
					t.Fatalf("%d admissions within %v of the server's clock from %v, at most %d allowed", in, limit.Per, a.before, limit.Rate)
				}
			}
			// Every goroutine calls at least once, and the first N calls fit.
			if len(admitted) < limit.Rate {
				t.Fatalf("admitted %d, fewer than %d", len(admitted), limit.Rate)
			}
			t.Logf("admitted %d over %v of the server's clock", len(admitted), admitted[len(admitted)-1].after-admitted[0].before)
		})
	}
}

// TestLogValue: a log's value is "~W:N:te:base;" and its entries (the
// exit µs in 16 digits, the running total in 10), and the key expires
// when its newest entry leaves the window, rounded up to a ms: on the
// server's clock, a key spent on has a TTL of at most W, and one whose
// cost was all refunded expires at once.
func TestLogValue(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := mustNew(t, client, logLimit(3, time.Hour), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	if d, err := s.AllowN("k", 2); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("AllowN(2) = %+v, %v; want allowed, 1 remaining", d, err)
	}
	v, err := client.Get(ctx, prefix+"k").Result()
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := strings.Cut(v, ";")
	if !ok || !strings.HasPrefix(head, "~3600000000:3:") || len(body) != 26 || !strings.HasSuffix(body, "0000000002") {
		t.Fatalf("the key holds %q, want ~3600000000:3:te:0; and one entry of cost 2", v)
	}
	ttl, err := client.PTTL(ctx, prefix+"k").Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("PTTL = %v, %v; want within (0, 1h]", ttl, err)
	}
	if err := s.Refund("k", 2); err != nil {
		t.Fatal(err)
	}
	d := s.Peek("k")
	if !d.Allowed || d.Remaining != 3 || d.ResetAfter != 0 {
		t.Fatalf("Peek after the refund = %+v, want allowed, 3 remaining, ResetAfter 0", d)
	}
	// The refund wrote an empty log with the least TTL, 1ms.
	for i := 0; ; i++ {
		n, err := client.Exists(ctx, prefix+"k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if ttl, err := client.PTTL(ctx, prefix+"k").Result(); err != nil || ttl > time.Millisecond {
			t.Fatalf("the emptied log's PTTL = %v, %v; want at most 1ms", ttl, err)
		}
		if i > 1000 {
			t.Fatal("the emptied log never expired")
		}
		time.Sleep(time.Millisecond) // Redis expires it on its own clock
	}
}

// TestLogExpiry: under a time source, a log's key lives until the later
// of its newest exit and an hour on the server's clock (timeSourceTTL);
// on the server's clock, a log of a 50ms window spent once has a TTL of
// at most 50ms, and is gone (Len 0) once the server's clock has passed
// the entry's exit.
func TestLogExpiry(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := mustNew(t, client, logLimit(2, 50*time.Millisecond), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	before := serverTime(t, client)
	if !s.Allow("k") {
		t.Fatal("the first request was denied")
	}
	ttl, err := client.PTTL(ctx, prefix+"k").Result()
	if err == nil && ttl == -2*time.Nanosecond { // gone already (go-redis reads PTTL's -2 as -2ns): a loaded machine took 50ms to ask
		if now := serverTime(t, client); now-before < 50*time.Millisecond-time.Millisecond {
			t.Fatalf("the key was gone %v after the spend, before its entry left the window", now-before)
		}
		return
	}
	if err != nil || ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("PTTL = %v, %v; want within (0, 50ms]", ttl, err)
	}
	for {
		n, err := client.Exists(ctx, prefix+"k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if now := serverTime(t, client); now-before > time.Minute {
			t.Fatal("the key outlived its entry by a minute")
		}
		time.Sleep(5 * time.Millisecond) // Redis expires it on its own clock
	}
	if now := serverTime(t, client); now-before < 50*time.Millisecond-time.Millisecond {
		t.Fatalf("the key expired %v after the spend, before its entry left the window", now-before)
	}
}

// TestLogPolicyChange: a key moved between a log and a token bucket or
// fixed window (SetPolicy, tiers), or between two logs, carries its debt
// as keyrate does (docs/design/carry.md): the other script reads a log's
// value as the cost in its window, owed by every window; the log script
// reads the most any window of the other script's value owes, and holds
// a debt D as one admission at the change that stays ⌈D/N⌉ windows; a log
// carried into a log of another window or a smaller N owes its cost whole
// the same way. Neither counts as malformed.
func TestLogPolicyChange(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	logP := keyrate.Policy{Name: "log", Limits: []keyrate.Limit{logLimit(4, time.Second)}}
	small := keyrate.Policy{Name: "small", Limits: []keyrate.Limit{logLimit(2, 2*time.Second)}}
	bucket := keyrate.Policy{Name: "bucket", Limits: []keyrate.Limit{keyrate.PerSecond(4)}}
	fixed := keyrate.Policy{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: time.Second}.Using(keyrate.FixedWindow)}}
	type step struct {
		at      time.Duration
		tier    string
		cost    int
		allowed bool
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		// A log spent full; a token bucket of 4 a second owes 4 tokens: none
		// at once, one after 250ms.
		{"log to bucket", []step{{0, "log", 4, true}, {0, "bucket", 1, false}, {249 * time.Millisecond, "bucket", 1, false}, {250 * time.Millisecond, "bucket", 1, true}}},
		// A bucket spent empty: the log owes its 4 tokens until the bucket
		// would be full again, at 1s.
		{"bucket to log", []step{{0, "bucket", 4, true}, {0, "log", 1, false}, {time.Second - time.Microsecond, "log", 1, false}, {time.Second, "log", 4, true}}},
		// A bucket owing 2 of 4: the log counts 2 until 500ms.
		{"half bucket to log", []step{{0, "bucket", 2, true}, {0, "log", 3, false}, {0, "log", 2, true}, {time.Second - time.Microsecond, "log", 1, false}, {time.Second, "log", 2, true}}},
		// A fixed window's count of 1: the log owes 1 until 1s.
		{"fixed to log", []step{{0, "fixed", 1, true}, {0, "log", 4, false}, {0, "log", 3, true}, {time.Second - time.Microsecond, "log", 1, false}, {time.Second, "log", 4, true}}},
		// A log of 3 spent; a fixed window of 4 owes 3 in now's window.
		{"log to fixed", []step{{0, "log", 3, true}, {0, "fixed", 2, false}, {0, "fixed", 1, true}, {time.Second, "fixed", 4, true}}},
		// A log of 3 spent at 0 and 1 at 500ms; a log of 2 per 2s owes the 4
		// in the window, whole, as spent at 999ms: two of its windows, until
		// 4.999s. At 1s the entries of 0 have left: 1 is carried.
		{"log to smaller log", []step{{0, "log", 3, true}, {500 * time.Millisecond, "log", 1, true}, {999 * time.Millisecond, "small", 1, false},
			{4999*time.Millisecond - time.Microsecond, "small", 1, false}, {4999 * time.Millisecond, "small", 2, true}}},
		{"log to smaller log later", []step{{0, "log", 3, true}, {500 * time.Millisecond, "log", 1, true}, {time.Second, "small", 1, true},
			{time.Second, "small", 1, false}}},
		// A log carried to a smaller one and back keeps its cost whole (as
		// in process), on the newest entry: 5 → 3 → 5 admits nothing more
		// until the entry leaves.
		{"log to small and back", []step{{0, "log", 4, true}, {0, "small", 1, false}, {0, "log", 1, false},
			{time.Second - time.Microsecond, "log", 1, false}, {time.Second, "log", 4, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(start)
			var errs []error
			s := mustNew(t, client, keyrate.PerSecond(1), redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)),
				redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(logP, small, bucket, fixed),
				redisbucket.WithOnError(func(err error) { errs = append(errs, err) }))
			for i, st := range c.steps {
				clk.Set(start + st.at)
				tier, err := s.Tier(st.tier)
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.AllowTier("k", tier, st.cost)
				if err != nil || d.Allowed != st.allowed {
					t.Fatalf("step %d: AllowTier(%s, %d) at +%v = %+v, %v; want allowed %v", i, st.tier, st.cost, st.at, d, err, st.allowed)
				}
			}
			if st := s.Stats(); st.Malformed != 0 || len(errs) != 0 {
				t.Fatalf("Stats().Malformed = %d, errors %v; want none", st.Malformed, errs)
			}
		})
	}
}

// TestLogCarriesReservedDebt: a token bucket of 5 an hour with 10
// reserved (its debt 2h, past its burst) moved to a log of 5 an hour and
// back owes all 10 again: the bucket admits nothing until 1h12m (the log
// kept the debt whole, above its N, as keyrate's carry does).
func TestLogCarriesReservedDebt(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(start)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(5), redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(keyrate.Policy{Name: "log", Limits: []keyrate.Limit{logLimit(5, time.Hour)}}))
	if _, err := s.Reserve("k", 5, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Reserve("k", 5, 2*time.Hour); err != nil || r.Delay() != time.Hour {
		t.Fatalf("Reserve(5) = %+v, %v; want a slot an hour away", r, err)
	}
	logTier, err := s.Tier("log")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.AllowTier("k", logTier, 1); err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 2*time.Hour {
		t.Fatalf("the log after 10 reserved: %+v, %v; want denied, none remaining, retry after 2h", d, err)
	}
	for _, c := range []struct {
		at      time.Duration
		allowed bool
	}{{0, false}, {time.Hour + 12*time.Minute - time.Microsecond, false}, {time.Hour + 12*time.Minute, true}} {
		clk.Set(start + c.at)
		if d, err := s.AllowN("k", 1); err != nil || d.Allowed != c.allowed {
			t.Fatalf("the bucket back at +%v: %+v, %v; want allowed %v", c.at, d, err, c.allowed)
		}
	}
}

// TestLogPolicyFunc: a key that WithPolicyFunc moves from a token bucket
// of 4 a second, spent empty, to a log of 4 a second, and back: the log
// counts the bucket's 4 until it would be full (1s), and the bucket then
// owes the log's 4.
func TestLogPolicyFunc(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(start)
	var useLog atomic.Bool
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(4), redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(keyrate.Policy{Name: "log", Limits: []keyrate.Limit{logLimit(4, time.Second)}}),
		keyrate.WithPolicyFunc(func(string) string {
			if useLog.Load() {
				return "log"
			}
			return ""
		}))
	step := func(at time.Duration, cost int, allowed bool, policy string) {
		t.Helper()
		clk.Set(start + at)
		if d, err := s.AllowN("k", cost); err != nil || d.Allowed != allowed || d.Policy != policy {
			t.Fatalf("AllowN(%d) at +%v = %+v, %v; want allowed %v under %q", cost, at, d, err, allowed, policy)
		}
	}
	step(0, 4, true, keyrate.DefaultPolicy)
	useLog.Store(true)
	step(0, 1, false, "log")
	step(time.Second-time.Microsecond, 1, false, "log")
	step(time.Second, 4, true, "log")
	useLog.Store(false)
	step(time.Second, 1, false, keyrate.DefaultPolicy)
	step(2*time.Second-time.Microsecond, 4, false, keyrate.DefaultPolicy)
	step(2*time.Second, 4, true, keyrate.DefaultPolicy)
}

// TestLogSetPolicy: SetPolicy from a token bucket to a log and back on a
// key in use, on the server's clock: the log finds the bucket's value and
// counts its debt as spent at the change, for ⌈debt/N⌉ of its windows; the
// bucket finds the log's and owes its cost.
func TestLogSetPolicy(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	s := mustNew(t, client, keyrate.PerMinute(3), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	if d, _ := s.AllowN("k", 3); !d.Allowed {
		t.Fatal("the bucket's first 3 were denied")
	}
	if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{logLimit(10, time.Second)}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.AllowN("k", 8)
	if err != nil || d.Allowed || d.Remaining != 7 || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
		t.Fatalf("the log after an emptied bucket of 3 a minute: AllowN(8) = %+v, %v; want denied, 7 remaining, for up to the log's window of 1s", d, err)
	}
	if d, err := s.AllowN("k", 7); err != nil || !d.Allowed {
		t.Fatalf("the log after an emptied bucket of 3 a minute: AllowN(7) = %+v, %v; want allowed", d, err)
	}
	if d, _ := s.AllowN("other", 10); !d.Allowed {
		t.Fatal("a new key under the log was denied 10")
	}
	if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerMinute(20)}}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.AllowN("other", 11); err != nil || d.Allowed {
		t.Fatalf("a bucket of 20 after a log that admitted 10: AllowN(11) = %+v, %v; want denied", d, err)
	}
	if d, err := s.AllowN("other", 10); err != nil || !d.Allowed {
		t.Fatalf("a bucket of 20 after a log that admitted 10: AllowN(10) = %+v, %v; want allowed", d, err)
	}
}

// TestLogMalformed: a log key holding a value no Store writes (another
// program's string, a log value out of range or with an entry not a
// number, another type: WRONGTYPE)
// is answered as a full log at now: denied with no error, counted in
// Stats.Malformed, and replaced by a spend with that full log, which has
// left the window W later. A peek writes nothing.
func TestLogMalformed(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	entry := "00000000000000010000000001"
	for _, bad := range []string{"junk", "~1000000:4:5:0;" + entry[:25], "~1000000:4:5:0;x" + entry[1:],
		"~1000000:4:5:0;" + strings.Repeat(entry, 5), "~1000000:4:5:0;00000000000000013000000000",
		"~1000000:4:5:0;99999999999999990000000001", "list", "hash",
		"~1000000:4:5:0;" + entry + "00000000000000x10000000002" + "90000000000000000000000003"} { // a bad entry inside: found by the search
		t.Run("value="+bad, func(t *testing.T) {
			clk := clock.NewManual(start)
			prefix := uniquePrefix(t)
			var reported error
			s := mustNew(t, client, logLimit(4, time.Second), redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(prefix),
				redisbucket.WithTimeout(slowTimeout), redisbucket.WithOnError(func(err error) { reported = err }))
			var err error
			switch bad {
			case "hash":
				err = client.HSet(t.Context(), prefix+"k", "f", "v").Err()
			case "list":
				err = client.RPush(t.Context(), prefix+"k", "a").Err()
			default:
				err = client.Set(t.Context(), prefix+"k", bad, 0).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := s.Peek("k"); d.Allowed || d.Remaining != 0 {
				t.Fatalf("Peek on %q = %+v; want denied with nothing remaining", bad, d)
			}
			d, err := s.AllowN("k", 1)
			if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Second {
				t.Fatalf("AllowN on %q = %+v, %v; want denied, nothing remaining, retry after 1s", bad, d, err)
			}
			if st := s.Stats(); st.Malformed != 2 || !errors.Is(reported, redisbucket.ErrMalformedBucket) {
				t.Fatalf("Stats().Malformed = %d, reported %v; want 2 and ErrMalformedBucket", st.Malformed, reported)
			}
			if v, err := client.Get(t.Context(), prefix+"k").Result(); err != nil || !strings.HasPrefix(v, "~1000000:4:") {
				t.Fatalf("the key holds %q, %v; want a log", v, err)
			}
			clk.Advance(time.Second)
			if d, err := s.AllowN("k", 4); err != nil || !d.Allowed {
				t.Fatalf("AllowN(4) a window later = %+v, %v; want allowed", d, err)
			}
		})
	}
}

// TestLogRefused: Reserve and Wait under a log return an error wrapping
// keyrate.ErrUnsupportedAlgorithm, sending nothing; leases are not taken
// for a log key (every call goes to Redis).
func TestLogRefused(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(start)
	s := mustNew(t, newClient(t, srv.Addr()), logLimit(10, time.Second), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeSource(clk), redisbucket.WithLeases(redisbucket.Lease{Size: 4, Life: time.Minute}),
		redisbucket.WithTimeout(slowTimeout))
	if _, err := s.Reserve("k", 1, time.Second); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Fatalf("Reserve = %v, want ErrUnsupportedAlgorithm", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := s.Wait(ctx, "k", 1); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		t.Fatalf("Wait = %v, want ErrUnsupportedAlgorithm", err)
	}
	if st := s.Stats(); st.Calls != 0 {
		t.Fatalf("Reserve and Wait sent %d calls, want none", st.Calls)
	}
	admitted := 0
	for range 15 {
		if s.Allow("hot") {
			admitted++
		}
	}
	if st := s.Stats(); admitted != 10 || st.Leases != 0 || st.Calls != 15 {
		t.Fatalf("admitted %d in %d calls with %d leases, want 10 in 15 with none", admitted, st.Calls, st.Leases)
	}
}

// TestLogFailClosed: an unreachable Redis under FailClosed denies a log's
// request with ErrUnavailable, Remaining 0 and RetryAfter W.
func TestLogFailClosed(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	s := mustNew(t, client, logLimit(3, time.Second), redisbucket.WithEvictionAllowed())
	d, err := s.AllowN("k", 1)
	if !errors.Is(err, redisbucket.ErrUnavailable) || d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Second {
		t.Fatalf("AllowN = %+v, %v; want denied, ErrUnavailable, 0 remaining, retry after 1s", d, err)
	}
}
