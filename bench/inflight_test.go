package bench

import (
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/racetest"
)

// inflightWorkloads are the workloads BenchmarkInflight runs: known keys,
// each call a TryAcquire and its Release.
var inflightWorkloads = []string{"hotkey", "uniform-1k"}

// BenchmarkInflight measures the in-process concurrency limit
// (inflight.Store) per call of TryAcquire and Release on a known key, named
// store=inflight/wl=<workload>, beside floor on the same
// workload (store=floor/wl=<workload>) in the same run: the bound
// is acquire+release at most 1.5× floor per call. The limit is far above
// the goroutines, so every acquire is admitted.
func BenchmarkInflight(b *testing.B) {
	racetest.Bench()
	var leaves []leaf
	for _, name := range inflightWorkloads {
		wl := workloadNamed(b, name)
		leaves = append(leaves,
			leaf{"store=floor/wl=" + wl.name, func(b *testing.B) { benchKnown(b, subjectCase{name: "floor", new: newFloor}, wl) }},
			leaf{"store=inflight/wl=" + wl.name, func(b *testing.B) { benchInflight(b, wl) }},
		)
	}
	runLeaves(b, leaves)
}

// benchInflight runs wl's sequence of keys, each call a TryAcquire and
// its Release, on a store that knows every key.
func benchInflight(b *testing.B, wl workload) {
	in := inputsFor(b, wl)
	s, err := inflight.New(inflight.MaxLimit)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range in.keys {
		sl, err := s.TryAcquire(k)
		if err != nil || !sl.Acquired() {
			b.Fatalf("setup: TryAcquire(%q) = %v, %v", k, sl.Acquired(), err)
		}
		sl.Release()
	}
	if got := s.Len(); got != len(in.keys) {
		b.Fatalf("wl=%s: store holds %d keys after setup, want %d", wl.name, got, len(in.keys))
	}
	seq := in.seq
	mask := len(seq) - 1
	var goroutines, refused atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)) * offsetStride
		n := int64(0)
		for pb.Next() {
			sl, _ := s.TryAcquire(seq[i&mask])
			if !sl.Acquired() {
				n++
			}
			sl.Release()
			i++
		}
		refused.Add(n)
	})
	b.StopTimer()
	if n := refused.Load(); n != 0 {
		b.Fatalf("wl=%s: %d acquires refused under a limit no run reaches", wl.name, n)
	}
	if got := s.Len(); got != len(in.keys) {
		b.Fatalf("wl=%s: store holds %d keys after the run, want %d", wl.name, got, len(in.keys))
	}
}
