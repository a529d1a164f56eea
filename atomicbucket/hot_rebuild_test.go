package atomicbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
)

// TestHotRebuildLosesAtMostHalfBurst pins the documented price of a
// rebuild of a hot key's segment (docs/design/hotkeys.md): the batches
// its shards took from the old slot give nothing back to the moved word,
// so with the clock stopped the key admits less than Burst, but never
// more, and loses at most what the shards can hold, half its Burst.
func TestHotRebuildLosesAtMostHalfBurst(t *testing.T) {
	const burst = 1000
	s, _ := hotStore(t, keyrate.PerSecond(1_000_000).WithBurst(burst), 16, time.Hour)
	if !s.Allow("hot") || !s.Allow("hot") { // the second takes a batch
		t.Fatal("a first call was denied")
	}
	atomicbucket.RebuildSegmentOf(s, "hot")
	n := 2
	for ; n <= 2*burst && s.Allow("hot"); n++ {
	}
	t.Logf("with the clock stopped, %d admitted across a rebuild (Burst %d)", n, burst)
	if n > burst || n < burst-burst/2 {
		t.Fatalf("with the clock stopped the hot key admitted %d across a rebuild of its segment; want from %d to %d", n, burst-burst/2, burst)
	}
}
