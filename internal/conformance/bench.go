package conformance

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
)

// maxRaceBenchKeys is the key count of the store benchmarks under the race
// detector, where filling a million keys for every run would take minutes.
const maxRaceBenchKeys = 4096

// benchKeys returns the key count of the store benchmarks: 1 000 000
// (maxRaceBenchKeys under the race detector), or KEYRATE_BENCH_KEYS.
func benchKeys(b *testing.B) int {
	if v := os.Getenv("KEYRATE_BENCH_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("KEYRATE_BENCH_KEYS=%q is not a count of at least 2", v)
		}
		return n
	}
	if racetest.Enabled {
		return maxRaceBenchKeys
	}
	return 1_000_000
}

// benchKey returns the i-th benchmark key, a fresh string.
func benchKey(i int) string { return "user-" + strconv.Itoa(1_000_000_000+i) }

// BenchSweep measures Allow on a store of benchKeys keys, half of them idle
// (full, so the first sweep removes them) and half active, with the clock
// frozen: sweep=off alone, sweep=on while another goroutine sweeps the
// store over and over. Besides ns/op it reports the p50 and p99 latency of
// one call, timed singly (each timing includes one reading of the clock,
// the same in both variants), and sweeps/op for sweep=on.
//
//	go test -run '^$' -bench Sweep -benchtime 2s ./striped/
func BenchSweep(b *testing.B, s Bounded) {
	racetest.Bench()
	for _, sweeping := range []bool{false, true} {
		for _, mode := range keyModes {
			on := map[bool]string{false: "off", true: "on"}[sweeping]
			b.Run(fmt.Sprintf("sweep=%s/store=%s/%s", on, s.Name, mode.name), func(b *testing.B) {
				benchSweep(b, s.with(mode.opts...), sweeping)
			})
		}
	}
}

func benchSweep(b *testing.B, s Bounded, sweeping bool) {
	n := benchKeys(b)
	limit := keyrate.PerSecond(1000).WithBurst(1_000_000) // never runs dry here
	l, clk := openBounded(b, s, limit)
	active := make([]string, n/2)
	for i := 0; i < n; i++ {
		k := benchKey(i)
		if i%2 == 0 {
			l.Allow(k) // idle: full again by the time the benchmark runs
		} else {
			active[i/2] = k
		}
	}
	clk.Advance(limit.FillTime())
	for _, k := range active {
		l.Allow(k)
	}
	if got := l.Len(); got < n/2 || got > n {
		b.Fatalf("Len = %d after filling %d keys", got, n)
	}
	var stop atomic.Bool
	var sweeps atomic.Int64
	var done sync.WaitGroup
	if sweeping {
		done.Add(1)
		go func() {
			defer done.Done()
			for !stop.Load() {
				l.Sweep()
				sweeps.Add(1)
			}
		}()
	}
	const samples = 1 << 16
	var mu sync.Mutex
	var all []time.Duration
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lat := make([]time.Duration, 0, samples)
		i := int(seq.Add(1)) * 7919
		for pb.Next() {
			k := active[i%len(active)]
			i += 104729 // a prime stride: spread over the keys
			t0 := time.Now()
			l.Allow(k)
			d := time.Since(t0)
			if len(lat) < samples {
				lat = append(lat, d)
			} else {
				lat[i%samples] = d
			}
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	b.StopTimer()
	stop.Store(true)
	done.Wait()
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	}
	if sweeping {
		b.ReportMetric(float64(sweeps.Load())/float64(b.N), "sweeps/op")
	}
}

// BenchKeyMemory reports the live heap per tracked key (B/key) of a store
// holding benchKeys keys of 15 bytes, with and without keyrate.WithHashedKeys,
// and how long a full garbage collection takes with it live (gc-ms): the
// store's share of both, since the keys are fresh strings that only the
// store keeps (with hashed keys, nothing keeps them). Run it once:
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x ./striped/
func BenchKeyMemory(b *testing.B, s Bounded) {
	racetest.Bench()
	for _, mode := range keyModes {
		b.Run(fmt.Sprintf("store=%s/%s", s.Name, mode.name), func(b *testing.B) {
			s := s.with(mode.opts...)
			n := benchKeys(b)
			var ms runtime.MemStats
			for i := 0; i < b.N; i++ {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				l, _ := openBounded(b, s, keyrate.PerSecond(10))
				for k := 0; k < n; k++ {
					l.Allow(benchKey(k))
				}
				runtime.GC()
				t0 := time.Now()
				runtime.GC()
				gc := time.Since(t0)
				runtime.ReadMemStats(&ms)
				if got := l.Len(); got != n {
					b.Fatalf("Len = %d, want %d", got, n)
				}
				b.ReportMetric(float64(ms.HeapAlloc-before)/float64(n), "B/key")
				b.ReportMetric(float64(gc.Microseconds())/1000, "gc-ms")
				runtime.KeepAlive(l)
			}
		})
	}
}
