package bench

import (
	"runtime"
	"testing"
	"time"

	"github.com/keyrate/keyrate/internal/racetest"
)

// BenchmarkMemory inserts a million 16-byte keys (-largekeys) into each
// subject and reports the live heap per key after a GC (B/key: the key's
// own 16 bytes, the map entry and the bucket), the duration of one forced
// GC with those keys live (gc-ns), and the number of keys (keys, so that
// a report can say how many). Each key has half its burst spent, so that no
// store evicts it as full (see prefill). Each key is its own allocation, as
// a key from a request would be, and only the subject holds it. The time
// per op is that of building the subject. The GC time depends on
// GOMAXPROCS (the GC marks in parallel), so bench/run.sh runs it without
// -cpu: at GOMAXPROCS = the machine's CPUs, as in production.
func BenchmarkMemory(b *testing.B) {
	racetest.Bench()
	var leaves []leaf
	for _, sc := range subjects {
		leaves = append(leaves, leaf{"store=" + sc.name, func(b *testing.B) {
			freeFixtures()
			n := maxKeys(int(largeKeys))
			var perKey, gc float64
			for range b.N {
				perKey, gc = measureMemory(b, sc, n)
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(gc, "gc-ns")
			b.ReportMetric(float64(n), "keys")
		}})
	}
	runLeaves(b, leaves)
}

// freeFixtures drops BenchmarkAllow's inputs and fixture, so that the heap
// a forced GC marks is the measured subject's alone.
func freeFixtures() {
	if current.f != nil {
		current.f.release()
		current.id, current.f = "", nil
	}
	clear(inputCache)
	clear(keySets)
}

// measureMemory builds one subject holding n keys and returns its live heap
// per key and the duration of a forced GC in nanoseconds.
func measureMemory(b *testing.B, sc subjectCase, n int) (perKey, gcNanos float64) {
	b.StopTimer()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.StartTimer()
	s, release, err := sc.new(open)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	buf := make([]byte, 0, keyLen)
	for i := range n {
		buf = appendKey(buf[:0], "mem-", i)
		prefill(s, open, string(buf))
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	start := time.Now()
	runtime.GC()
	gc := time.Since(start)
	if got := s.Len(); got != n {
		b.Fatalf("store=%s: holds %d keys, want %d (%d, capped at %d under -race)", sc.name, got, n, int(largeKeys), maxRaceKeys)
	}
	runtime.KeepAlive(s)
	b.StartTimer()
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n), float64(gc.Nanoseconds())
}
