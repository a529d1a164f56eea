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
	// goroutine's key is emptied here, and holds no token for an hour.
	cached := mustNew(b, client, keyrate.PerHour(1).WithBurst(1), redisbucket.WithDenyCache(64),
		redisbucket.WithPrefix(uniquePrefix(b)), redisbucket.WithTimeout(time.Second))
	for _, key := range append([]string{"warm"}, benchKeys(50)...) {
		if d, err := cached.AllowN(key, 1); err != nil || !d.Allowed {
			b.Fatalf("AllowN(%q) on a new key = %+v, %v", key, d, err)
		}
	}
	ops := []struct {
		name string
		call func(key string) error
	}{
		{"allow", func(key string) error {
			d, err := store.AllowN(key, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowN(%q) denied: the benchmark's limit should allow every call", key)
			}
			return err
		}},
		{"allow-pipelined", func(key string) error {
			d, err := pipelined.AllowN(key, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowN(%q) denied: the benchmark's limit should allow every call", key)
			}
			return err
		}},
		{"allow-windows=2", func(key string) error {
			d, err := store.AllowTier(key+"-two", two, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowTier(%q) denied: the benchmark's limits should allow every call", key)
			}
			return err
		}},
		{"allow-sliding", func(key string) error {
			d, err := store.AllowTier(key+"-sliding", sliding, 1)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("AllowTier(%q) denied: the benchmark's limit should allow every call", key)
			}
			return err
		}},
		{"wait", func(key string) error {
			return store.Wait(context.Background(), key+"-wait", 1) // never sleeps: the limit allows every call
		}},
		{"deny-cached", func(key string) error {
			d, err := cached.AllowN(key, 1)
			if err == nil && d.Allowed {
				err = fmt.Errorf("AllowN(%q) allowed on an empty bucket", key)
			}
			return err
		}},
		{"evalsha-empty", func(key string) error {
			return emptyScript.Run(context.Background(), client, []string{key}).Err()
		}},
	}
	for _, op := range ops {
		for _, clients := range []int{1, 8, 50} {
			b.Run(fmt.Sprintf("op=%s/clients=%d", op.name, clients), func(b *testing.B) {
				if err := op.call("warm"); err != nil { // loads the script
					b.Fatal(err)
				}
				b.ReportAllocs()
				calls := cached.Stats().Calls
				latencies := make([][]time.Duration, clients)
				var wg sync.WaitGroup
				b.ResetTimer()
				for g := range clients {
					n := b.N / clients
					if g < b.N%clients {
						n++
					}
					lat := make([]time.Duration, n)
					latencies[g] = lat
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
