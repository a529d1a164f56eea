package redisbucket_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/redisbucket"
)

// emptyScript is the baseline: one EVALSHA that does nothing, on the same
// client and key as the store's script.
var emptyScript = redis.NewScript("return 0")

// floorScript reads the server's TIME, GETs its key and SETs it with a
// TTL, and computes nothing: the least a limiter that keeps its state in
// Redis on the server's clock asks of the server each call, given the
// store's arguments.
var floorScript = redis.NewScript(`local t = redis.call('TIME')
local v = redis.pcall('GET', KEYS[1])
redis.call('SET', KEYS[1], string.format('%d:%d', tonumber(t[1]) * 1000000 + tonumber(t[2]), 0), 'PX', ARGV[3])
return {-1, 0, 0, 0, 0}`)

// floorArgs are the store's eight arguments for the benchmark's limit
// (the server's TIME, cost 1, the TTL in ms, K, I, G and F, then the
// descriptor), sent with floorScript so that they cost the server the
// same to receive. The store sets the same TTL, 1 ms, on these keys: a
// bucket one token short of full.
var floorArgs = []any{"-1", 1, 1, 1, 1, 1000, 1_000_000, "1:1:1000:1000000"}

// BenchmarkRedis compares a Store's AllowN (op=allow: one EVALSHA of the
// GCRA script, on the server's TIME, every call allowed so every call
// writes), the same under WithPipelining's defaults (op=allow-pipelined:
// the calls that arrive while two are in flight go out together, in
// pipelines of up to 16), and AllowTier under a policy of two windows
// (op=allow-windows=2) and under a sliding window (op=allow-sliding:
// the window algorithms' path), Wait (op=wait: the script's reservation mode,
// never needing to sleep) and AllowN on a key the deny cache denies
// (op=deny-cached: no round trip) with an EVALSHA of an empty script
// (op=evalsha-empty), at 1, 8 and 50 client goroutines sharing one pool,
// each on its own key. Beside
// ns/op (wall time over all goroutines) it reports each call's latency at
// the median and the 99th percentile.
//
// Those ops run one after another, seconds apart, and a shared machine's
// speed moves in seconds. op=paired measures the overhead call by call,
// with one client (with more, the calls would share the server's queue,
// and each call's latency would be mostly the others'): it alternates
// AllowN, floorScript (the least any script on the server's clock must
// do) and the empty EVALSHA, so that the three meet the same machine;
// p50-ns and p99-ns are AllowN's, floor-p50-ns and empty-p50-ns the
// others' medians, and ns/op covers all three calls.
func BenchmarkRedis(b *testing.B) {
	racetest.Bench()
	srv := server(b)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 64})
	b.Cleanup(func() { _ = client.Close() })
	store := mustNew(b, client, keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
		redisbucket.WithPrefix(uniquePrefix(b)), redisbucket.WithTimeout(time.Second),
		keyrate.WithPolicies(keyrate.Policy{Name: "two", Limits: []keyrate.Limit{
			keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
			{Rate: 1_000_000_000, Per: time.Hour, Burst: 1_000_000_000},
		}}, keyrate.Policy{Name: "sliding", Limits: []keyrate.Limit{
			keyrate.Limit{Rate: 1_000_000, Per: time.Hour}.Using(keyrate.SlidingWindow),
		}}))
	// pipelined is store's twin that sends concurrent calls together
	// (WithPipelining's defaults).
	pipelined := mustNew(b, client, keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
		redisbucket.WithPrefix(uniquePrefix(b)), redisbucket.WithTimeout(time.Second),
		redisbucket.WithPipelining(redisbucket.Pipelining{}))
	two, err := store.Tier("two")
	if err != nil {
		b.Fatal(err)
	}
	sliding, err := store.Tier("sliding")
	if err != nil {
		b.Fatal(err)
	}
	// cached denies every call of op=deny-cached from its deny cache: each
	// goroutine's key is emptied here, and holds no token for an hour. The
	// cache is far larger than the 51 keys, so that no bucket of it (its
	// hash seed is random) has more of them than it holds: at 64 keys, 1
	// run in 1 000 or so had one left out, which Redis answered.
	cached := mustNew(b, client, keyrate.PerHour(1).WithBurst(1), redisbucket.WithDenyCache(1024),
		redisbucket.WithPrefix(uniquePrefix(b)), redisbucket.WithTimeout(time.Second))
	cachedKeys := append([]string{"warm"}, benchKeys(50)...)
	if n := redisbucket.DenyCacheOverflow(cached, cachedKeys); n != 0 {
		b.Fatalf("the deny cache has no room for %d of op=deny-cached's %d keys", n, len(cachedKeys))
	}
	for _, key := range cachedKeys {
		if d, err := cached.AllowN(key, 1); err != nil || !d.Allowed {
			b.Fatalf("AllowN(%q) on a new key = %+v, %v", key, d, err)
		}
	}
	empty := func(key string) error {
		return emptyScript.Run(context.Background(), client, []string{key}).Err()
	}
	allow := func(key string) error {
		d, err := store.AllowN(key, 1)
		if err == nil && !d.Allowed {
			err = fmt.Errorf("AllowN(%q) denied: the benchmark's limit should allow every call", key)
		}
		return err
	}
	// timed is a call op=paired makes after each of its op's, and the
	// unit of its median latency.
	type timed struct {
		unit string
		call func(key string) error
	}
	ops := []struct {
		name    string
		call    func(key string) error
		also    []timed
		clients []int // nil: 1, 8 and 50
	}{
		{name: "allow", call: allow},
		{name: "allow-pipelined", call: func(key string) error {
			d, err := pipelined.AllowN(key, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowN(%q) denied: the benchmark's limit should allow every call", key)
			}
			return err
		}},
		{name: "allow-windows=2", call: func(key string) error {
			d, err := store.AllowTier(key+"-two", two, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowTier(%q) denied: the benchmark's limits should allow every call", key)
			}
			return err
		}},
		{name: "allow-sliding", call: func(key string) error {
			d, err := store.AllowTier(key+"-sliding", sliding, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowTier(%q) denied: the benchmark's limit should allow every call", key)
			}
			return err
		}},
		{name: "wait", call: func(key string) error {
			return store.Wait(context.Background(), key+"-wait", 1) // never sleeps: the limit allows every call
		}},
		{name: "deny-cached", call: func(key string) error {
			d, err := cached.AllowN(key, 1)
			if err == nil && d.Allowed {
				err = fmt.Errorf("AllowN(%q) allowed on an empty bucket", key)
			}
			return err
		}},
		{name: "evalsha-empty", call: empty},
		{name: "paired", call: allow, also: []timed{
			{"floor-p50-ns", func(key string) error {
				return floorScript.Run(context.Background(), client, []string{key + "-floor"}, floorArgs...).Err()
			}},
			{"empty-p50-ns", empty},
		}, clients: []int{1}},
	}
	for _, op := range ops {
		if op.clients == nil {
			op.clients = []int{1, 8, 50}
		}
		for _, clients := range op.clients {
			b.Run(fmt.Sprintf("op=%s/clients=%d", op.name, clients), func(b *testing.B) {
				if err := op.call("warm"); err != nil { // loads the script
					b.Fatal(err)
				}
				b.ReportAllocs()
				calls := cached.Stats().Calls
				latencies := make([][]time.Duration, clients)
				also := make([][][]time.Duration, len(op.also)) // [also][goroutine][call]
				for a := range also {
					also[a] = make([][]time.Duration, clients)
				}
				var wg sync.WaitGroup
				b.ResetTimer()
				for g := range clients {
					n := b.N / clients
					if g < b.N%clients {
						n++
					}
					lat := make([]time.Duration, n)
					latencies[g] = lat
					for a := range also {
						also[a][g] = make([]time.Duration, n)
					}
					key := benchKeys(clients)[g]
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range lat {
							begin := time.Now()
							if err := op.call(key); err != nil {
								b.Error(err)
								return
							}
							lat[i] = time.Since(begin)
							for a, t := range op.also {
								begin := time.Now()
								if err := t.call(key); err != nil {
									b.Error(err)
									return
								}
								also[a][g][i] = time.Since(begin)
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				if op.name == "deny-cached" && cached.Stats().Calls != calls {
					b.Fatalf("op=deny-cached sent %d calls to Redis; want none", cached.Stats().Calls-calls)
				}
				all := slices.Concat(latencies...)
				if len(all) != b.N {
					b.Fatalf("collected %d latencies for b.N = %d", len(all), b.N)
				}
				slices.Sort(all)
				b.ReportMetric(float64(all[len(all)*50/100].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
				for a, t := range op.also {
					all := slices.Concat(also[a]...)
					slices.Sort(all)
					b.ReportMetric(float64(all[len(all)*50/100].Nanoseconds()), t.unit)
				}
			})
		}
	}
}

// benchKeys returns the keys of n benchmark goroutines, one each.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for g := range keys {
		keys[g] = fmt.Sprint("bench-", g)
	}
	return keys
}
