package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate/internal/racetest"
)

// BenchmarkLeanFloor is the floor written as an outside harness writes it,
// with nothing of the driver around it: in b.RunParallel over the
// workload's pre-generated key sequence, time.Since on a fixed origin,
// an xsync.MapOf load of a known key and one compare-and-swap, inline. It
// is the yardstick BenchmarkAllow's store=floor rows are checked against:
// their difference is what the driver and the floor's own code add (see
// bench/doc.go, "The floor").
func BenchmarkLeanFloor(b *testing.B) {
	racetest.Bench()
	for _, name := range []string{"hotkey", "uniform-1k"} {
		wl := workloadNamed(b, name)
		b.Run("wl="+wl.name, func(b *testing.B) {
			in := inputsFor(b, wl)
			words := xsync.NewMapOf[string, *atomic.Uint64]()
			for _, k := range in.keys {
				words.Store(k, new(atomic.Uint64))
			}
			seq, mask := in.seq, len(in.seq)-1
			origin := time.Now()
			var goroutines atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(goroutines.Add(1)) * offsetStride
				for pb.Next() {
					now := uint64(time.Since(origin))
					w, _ := words.Load(seq[i&mask])
					old := w.Load()
					w.CompareAndSwap(old, max(old, now)+1)
					i++
				}
			})
		})
	}
}
