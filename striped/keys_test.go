package striped_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/striped"
)

// keyLengths are key lengths on each side of the table's comparisons: a
// record compared as two words (8 to 16 bytes), compared byte by byte
// (under 8, over 16), and a length that takes two bytes (128 on).
var keyLengths = []int{0, 1, 7, 8, 9, 15, 16, 17, 127, 128, 300}

// TestKeyLengths checks that keys of every length, sharing long prefixes
// and suffixes, are told apart exactly: each gets its own burst, no more,
// with and without hashed keys, and that a known key of each length costs
// no allocation.
func TestKeyLengths(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed=", hashed), func(t *testing.T) {
			clk := clock.NewManual(time.Hour)
			opts := []keyrate.Option{keyrate.WithClock(clk), striped.WithStripes(1)}
			if hashed {
				opts = append(opts, keyrate.WithHashedKeys())
			}
			s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 3}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, n := range keyLengths {
				for _, fill := range []string{"a", "b"} { // differ in the last byte only
					if n == 0 && fill == "b" {
						continue
					}
					keys = append(keys, strings.Repeat("a", max(n-1, 0))+fill[:min(n, 1)])
				}
				if n > 1 { // differ in the first byte only
					keys = append(keys, "b"+strings.Repeat("a", n-1))
				}
			}
			for round := range 4 {
				for _, k := range keys {
					if got, want := s.Allow(k), round < 3; got != want {
						t.Fatalf("round %d: Allow(key of %d bytes %.12q…) = %v, want %v", round, len(k), k, got, want)
					}
				}
			}
			if got := s.Len(); got != len(keys) {
				t.Fatalf("Len() = %d, want %d", got, len(keys))
			}
			for _, k := range keys {
				if n := testing.AllocsPerRun(100, func() { s.Allow(k) }); n != 0 {
					t.Errorf("Allow(key of %d bytes): %v allocations, want 0", len(k), n)
				}
			}
		})
	}
}

// TestChurnKeepsMemory inserts rounds of new keys that all fill up and
// are swept: the keys of earlier rounds must not hold the store's memory
// (its tables shrink and its arenas compact), and the keys of the last
// round must be decided exactly.
func TestChurnKeepsMemory(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Second, Burst: 1}, keyrate.WithClock(clk), striped.WithStripes(4))
	if err != nil {
		t.Fatal(err)
	}
	const keys = 5000
	for round := range 5 {
		for i := range keys {
			k := fmt.Sprintf("round-%d-key-%d-%s", round, i, strings.Repeat("x", i%40))
			if !s.Allow(k) || s.Allow(k) {
				t.Fatalf("round %d: key %q not decided as a new key of burst 1", round, k)
			}
		}
		clk.Advance(2 * time.Second)
		if n := s.Sweep(); n != keys {
			t.Fatalf("round %d: Sweep() = %d, want %d", round, n, keys)
		}
		if n := s.Len(); n != 0 {
			t.Fatalf("round %d: Len() = %d after a sweep of full keys", round, n)
		}
	}
	if got := striped.MemoryOf(s); got != 0 {
		t.Fatalf("an empty store holds %d bytes of tables and arenas, want 0", got)
	}
}

// scannable returns the bytes of heap the garbage collector scans
// (objects that hold pointers), as of the last GC.
func scannable() int64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestKeysArePointerFree checks that the garbage collector has nothing
// to scan per key: 50k keys, with and without hashed keys, add less than
// 1 byte a key of scannable heap (the Go maps this store used to keep
// added about 100 bytes a key with string keys and 84 with hashed ones).
// The figure is the runtime's own count, not a timing.
func TestKeysArePointerFree(t *testing.T) {
	const keys = 50_000
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed=", hashed), func(t *testing.T) {
			opts := []keyrate.Option{}
			if hashed {
				opts = append(opts, keyrate.WithHashedKeys())
			}
			s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 10}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			// From the empty store, so that what the keys add is measured
			// without the store's own (about 42 KB, made by New,
			// which alone came within 7 KB of the bound, and past it when
			// the runtime's own scannable heap moved by that much).
			runtime.GC()
			before := scannable()
			for i := range keys {
				s.Allow(fmt.Sprintf("key-%012d", i))
			}
			runtime.GC()
			grown := scannable() - before
			if s.Len() != keys {
				t.Fatalf("Len() = %d, want %d", s.Len(), keys)
			}
			if grown > keys {
				t.Fatalf("%d keys added %d bytes of heap the GC scans (%.1f a key), want under 1 a key", keys, grown, float64(grown)/keys)
			}
			runtime.KeepAlive(s)
		})
	}
}
