package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// windowAlgorithms are the window algorithms the script runs.
var windowAlgorithms = []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow}

// sameAsModel fails t unless d has the fields of want, the model's
// Decision (Allowed, Remaining and the durations).
func sameAsModel(t *testing.T, what string, d, want keyrate.Decision) {
	t.Helper()
	want.Policy, want.Window, want.Limit = d.Policy, d.Window, d.Limit
	if d != want {
		t.Fatalf("%s = %+v, want %+v", what, d, want)
	}
}

// TestWindowBoundaries spends a burst at the first, second, middle and
// last µs of a window, then requests at the last µs of that window, the
// first and the second of the next (W − 1, W and W + 1 after a window's
// start), the next window's last and the one after's first, each checked
// against conformance.WindowModel, field for field, on one server and on
// a Redis Cluster. Windows start at multiples of W since the time
// source's 0.
func TestWindowBoundaries(t *testing.T) {
	const w = 10 * time.Millisecond
	for _, b := range backends(t) {
		client := b.client(t)
		for _, alg := range windowAlgorithms {
			for _, burstAt := range []time.Duration{0, time.Microsecond, w / 2, w - time.Microsecond} {
				t.Run(fmt.Sprintf("redis=%s/alg=%v/burst-at=%v", b.name, alg, burstAt), func(t *testing.T) {
					limit := keyrate.Limit{Rate: 5, Per: w}.Using(alg)
					clk := clock.NewManual(start) // start is a multiple of W
					s := mustNew(t, client, limit, redisbucket.WithTimeSource(clk),
						redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
					m := conformance.NewWindowModel(limit)
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
					for range limit.Rate + 1 {
						step(burstAt, 1)
					}
					for _, at := range []time.Duration{w - time.Microsecond, w, w + time.Microsecond, 2*w - time.Microsecond, 2 * w, 3 * w} {
						step(at, 1)
						step(at, 2)
						clk.Set(start + at)
						sameAsModel(t, fmt.Sprintf("Peek at +%v", at), s.Peek("k"), m.Decide(int64(at), 1, m.Allows(int64(at), 1)))
					}
				})
			}
		}
	}
}

// TestWindowFleet: four processes (each its own client), eight goroutines
// each, on one key of a window limit, released at once on a time source
// frozen at a window's start: the fleet admits exactly N. Then, frozen at
// the next window's start and at its middle, exactly what the model
// allows there: N again for the fixed window, none and then ⌊N/2⌋ for
// the sliding one. On one server and on a Redis Cluster.
func TestWindowFleet(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range windowAlgorithms {
			for _, cache := range []bool{false, true} {
				t.Run(fmt.Sprintf("redis=%s/alg=%v/deny-cache=%v", b.name, alg, cache), func(t *testing.T) {
					limit := keyrate.Limit{Rate: 20, Per: time.Minute}.Using(alg)
					clk := clock.NewManual(start)
					opts := []keyrate.Option{redisbucket.WithTimeSource(clk)}
					if cache {
						opts = append(opts, redisbucket.WithDenyCache(16))
					}
					fleet := windowFleet(t, b.client, limit, uniquePrefix(t), opts...)
					m := conformance.NewWindowModel(limit)
					for _, at := range []time.Duration{0, limit.Per, limit.Per + limit.Per/2} {
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
	}
}

// TestWindowFleetServerTime: the fleet of TestWindowFleet on the server's
// clock, for about a second, on windows of a second: the fleet admits at
// most N in each window the run touched (the run's server TIME read
// before and after it), and at least N.
func TestWindowFleetServerTime(t *testing.T) {
	for _, b := range backends(t) {
		for _, alg := range windowAlgorithms {
			t.Run(fmt.Sprintf("redis=%s/alg=%v", b.name, alg), func(t *testing.T) {
				limit := keyrate.Limit{Rate: 20, Per: time.Second}.Using(alg)
				client := b.client(t)
				fleet := windowFleet(t, b.client, limit, uniquePrefix(t))
				before := serverTime(t, client)
				begin := time.Now()
				got := runFleet(t, fleet, "shared", func(call int) bool { return call > 0 && time.Since(begin) >= time.Second })
				after := serverTime(t, client)
				windows := int64(after/limit.Per-before/limit.Per) + 1
				t.Logf("admitted %d in %d windows", got, windows)
				if most := windows * int64(limit.Rate); got > most {
					t.Fatalf("the fleet admitted %d in %d windows of %d", got, windows, limit.Rate)
				}
				if got < int64(limit.Rate) {
					t.Fatalf("the fleet admitted %d, fewer than %d", got, limit.Rate)
				}
			})
		}
	}
}

// serverTime reads the server's TIME, as the script does, since the Unix
// epoch.
func serverTime(t *testing.T, c redis.UniversalClient) time.Duration {
	t.Helper()
	tm, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(tm.UnixMicro()) * time.Microsecond
}

// windowFleet returns nodes Stores of limit sharing prefix, each with its
// own client from newClient.
func windowFleet(t *testing.T, newClient func(testing.TB) redis.UniversalClient, limit keyrate.Limit, prefix string, opts ...keyrate.Option) []allowFunc {
	t.Helper()
	fleet := make([]allowFunc, nodes)
	for i := range fleet {
		s := mustNew(t, newClient(t), limit,
			append([]keyrate.Option{redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout)}, opts...)...)
		fleet[i] = func(ctx context.Context, key string, _ int) (bool, error) {
			d, err := s.AllowNContext(ctx, key, 1)
			return d.Allowed, err
		}
	}
	return fleet
}

// TestWindowValue: a window's value is "0:W:N:A/idx:p:q", the window of
// the Unix epoch's multiples of W and its counts, and the key expires
// when its counts no longer weigh: at the next window's end (rounded up
// to a ms), for the sliding window's estimate and for the fixed window's
// carry to another limit (keyrate.PolicyLimiter). The windows are an hour
// long, and a key found gone must have reached its end on the server's
// clock.
func TestWindowValue(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	for _, alg := range windowAlgorithms {
		t.Run("alg="+alg.String(), func(t *testing.T) {
			limit := keyrate.Limit{Rate: 3, Per: time.Hour}.Using(alg)
			a, weighs := 1, 2*limit.Per // the windows a count weighs on
			if alg == keyrate.SlidingWindow {
				a = 2
			}
			prefix := uniquePrefix(t)
			s := mustNew(t, client, limit, redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
			before := serverTime(t, client)
			if _, err := s.AllowN("k", 2); err != nil {
				t.Fatal(err)
			}
			var get *redis.StringCmd
			var pttl *redis.DurationCmd
			if _, err := client.Pipelined(t.Context(), func(p redis.Pipeliner) error {
				get, pttl = p.Get(t.Context(), prefix+"k"), p.PTTL(t.Context(), prefix+"k")
				return nil
			}); err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			after := serverTime(t, client)
			if errors.Is(get.Err(), redis.Nil) {
				if end := before.Truncate(limit.Per) + weighs; after < end {
					t.Fatalf("the key is gone at %v, before its counts' end at %v", after, end)
				}
				return
			}
			v := get.Val()
			desc, state, _ := strings.Cut(v, "/")
			if want := fmt.Sprintf("0:3600000000:3:%d", a); desc != want {
				t.Fatalf("value %q: descriptor %q, want %q", v, desc, want)
			}
			f := strings.Split(state, ":")
			idx, _ := strconv.ParseInt(f[0], 10, 64)
			// The call ran between the two readings of TIME.
			if lo, hi := int64(before/limit.Per), int64(after/limit.Per); len(f) != 3 || idx < lo || idx > hi || f[1] != "0" || f[2] != "2" {
				t.Fatalf("value %q, want a window from %d to %d, 0 and 2 counted", v, lo, hi)
			}
			end := time.Duration(idx)*limit.Per + weighs
			// rounded up to a whole ms; gone only at the end
			ttl, most := pttl.Val(), (end - before + time.Millisecond - 1).Truncate(time.Millisecond)
			if ttl > most || (ttl <= 0 && after < end) {
				t.Fatalf("PTTL %v at %v, want above 0 and at most %v (or gone from %v)", ttl, after, most, end)
			}
		})
	}
}

// TestWindowReserveRefused: Reserve and Wait under a window algorithm
// return an error wrapping keyrate.ErrUnsupportedAlgorithm, sending
// nothing.
func TestWindowReserveRefused(t *testing.T) {
	srv := server(t)
	for _, alg := range windowAlgorithms {
		s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerSecond(5).Using(alg), redisbucket.WithPrefix(uniquePrefix(t)))
		if _, err := s.Reserve("k", 1, time.Second); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			t.Errorf("%v: Reserve = %v, want an error wrapping %v", alg, err, keyrate.ErrUnsupportedAlgorithm)
		}
		if err := s.Wait(t.Context(), "k", 1); !errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			t.Errorf("%v: Wait = %v, want an error wrapping %v", alg, err, keyrate.ErrUnsupportedAlgorithm)
		}
		if st := s.Stats(); st.Calls != 0 {
			t.Errorf("%v: %d calls, want none", alg, st.Calls)
		}
	}
}

// TestWindowLeasesBypassed: WithLeases leaves a window algorithm's keys
// to Redis, call by call (a lease's tokens handed out in the next window
// would count in neither): a hot key takes no lease, and admits exactly N
// in a window.
func TestWindowLeasesBypassed(t *testing.T) {
	srv := server(t)
	for _, alg := range windowAlgorithms {
		clk := clock.NewManual(start)
		s := mustNew(t, newClient(t, srv.Addr()), keyrate.Limit{Rate: 10, Per: time.Second}.Using(alg),
			redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeSource(clk),
			redisbucket.WithLeases(redisbucket.Lease{Size: 4, Life: time.Minute}), redisbucket.WithTimeout(slowTimeout))
		admitted := 0
		for range 15 {
			if s.Allow("hot") {
				admitted++
			}
		}
		if st := s.Stats(); admitted != 10 || st.Leases != 0 || st.Calls != 15 {
			t.Errorf("%v: admitted %d in %d calls with %d leases, want 10 in 15 with none", alg, admitted, st.Calls, st.Leases)
		}
	}
}

// TestWindowFallbackShare: FallbackLocal with WithFallbackNodes(4) under a
// window limit of 20 answers an unreachable Redis from a fallback that
// counts 5 in the window.
func TestWindowFallbackShare(t *testing.T) {
	for _, alg := range windowAlgorithms {
		client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = client.Close() })
		clk := clock.NewManual(start)
		s := mustNew(t, client, keyrate.Limit{Rate: 20, Per: time.Minute}.Using(alg),
			redisbucket.WithTimeSource(clk), redisbucket.WithEvictionAllowed(),
			redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackNodes(4))
		admitted := 0
		for range 10 {
			if s.Allow("k") {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("%v: the fallback admitted %d of 10, want 5", alg, admitted)
		}
	}
}

// TestWindowMalformed: a window's key holding a value no Store writes
// (another program's, counts above N, a previous count in a fixed window,
// a window past 2^53 µs, another type) is answered as a window that has
// counted N at now: denied, counted in Stats.Malformed, and replaced by a
// spend with that full window, which the next window forgets.
func TestWindowMalformed(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	for _, alg := range windowAlgorithms {
		limit := keyrate.Limit{Rate: 4, Per: time.Second}.Using(alg)
		a := map[keyrate.Algorithm]int{keyrate.FixedWindow: 1, keyrate.SlidingWindow: 2}[alg]
		desc := fmt.Sprintf("0:1000000:4:%d", a)
		bads := []string{"junk", "12:0", desc + "/1000:0", desc + "/1000:0:5", desc + "/1000:5:0",
			desc + "/9007199254741:0:0", desc + "/99999999999999999:0:0", "hash"}
		if alg == keyrate.SlidingWindow {
			bads[4] = desc + "/1000:5:1" // a sliding window has a previous count, up to N
		}
		for _, bad := range bads {
			t.Run(fmt.Sprintf("alg=%v/value=%s", alg, bad), func(t *testing.T) {
				clk := clock.NewManual(start)
				prefix := uniquePrefix(t)
				s := mustNew(t, client, limit, redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
				var err error
				if bad == "hash" {
					err = client.HSet(t.Context(), prefix+"k", "f", "v").Err()
				} else {
					err = client.Set(t.Context(), prefix+"k", bad, 0).Err()
				}
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.AllowN("k", 1)
				if err != nil || d.Allowed || d.Remaining != 0 {
					t.Fatalf("AllowN on %q = %+v, %v; want denied with nothing remaining", bad, d, err)
				}
				if st := s.Stats(); st.Malformed != 1 {
					t.Fatalf("Stats().Malformed = %d, want 1", st.Malformed)
				}
				want := fmt.Sprintf("%s/%d:0:4", desc, start/time.Second)
				if v, err := client.Get(t.Context(), prefix+"k").Result(); err != nil || v != want {
					t.Fatalf("the key holds %q, %v; want %q", v, err, want)
				}
				clk.Advance(2 * time.Second) // past the window the full count weighs on
				if d, err := s.AllowN("k", 4); err != nil || !d.Allowed {
					t.Fatalf("AllowN(4) two windows later = %+v, %v; want allowed", d, err)
				}
			})
		}
	}
}
