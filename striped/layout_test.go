package striped

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/flatmap"
	"github.com/keyrate/keyrate/internal/layout"
)

// line returns the index of the cache line holding address a.
func line(a uintptr) uintptr { return a / layout.CacheLine }

// TestStripePadding asserts the layout of a stripe that the lock-free
// reads rely on: a whole number of cache lines, so that neighbouring
// stripes never share one; the fields Seek reads (flatmap.SeekBytes) at
// the start of its first line; and the mutex, which every locked call
// writes, on a line of its own beyond them, so that a write to it never
// takes from another core the line it reads without the lock.
func TestStripePadding(t *testing.T) {
	var sp stripe
	size := unsafe.Sizeof(sp)
	if size%layout.CacheLine != 0 {
		t.Errorf("unsafe.Sizeof(stripe{}) = %d, want a multiple of %d", size, layout.CacheLine)
	}
	if unsafe.Sizeof(stripeData{})%layout.CacheLine == 0 {
		t.Errorf("stripeData is %d bytes, whole lines: the zero-size padding after it would add a word", unsafe.Sizeof(stripeData{}))
	}
	if off := unsafe.Offsetof(sp.m); off != 0 || flatmap.SeekBytes > layout.CacheLine {
		t.Errorf("the map is at offset %d with %d bytes Seek reads; want them at 0, within one line", off, flatmap.SeekBytes)
	}
	if mu := unsafe.Offsetof(sp.mu); line(mu) <= line(flatmap.SeekBytes-1) || line(mu) != line(mu+unsafe.Sizeof(sp.mu)-1) {
		t.Errorf("the mutex is at offset %d: on a line Seek reads (bytes 0 to %d)", mu, flatmap.SeekBytes-1)
	}
	// On a 64-bit platform a stripe is three lines: the map's two and the
	// mutex's. A field more would make it four.
	if unsafe.Sizeof(uintptr(0)) == 8 && size > 3*layout.CacheLine {
		t.Errorf("unsafe.Sizeof(stripe{}) = %d, want at most %d", size, 3*layout.CacheLine)
	}
}

// TestStripesAligned checks that the stripes array starts on a cache line
// for every stripe count, so that the padding of TestStripePadding puts
// each stripe's mutex on its own line. (The allocator rounds a stripes
// array up to a size class that is a whole number of lines, or a page.)
func TestStripesAligned(t *testing.T) {
	for n := 1; n <= 4096; n *= 2 {
		s, err := New(limitForTest, WithStripes(n))
		if err != nil {
			t.Fatal(err)
		}
		if a := uintptr(unsafe.Pointer(&s.tab.stripes[0])); a%layout.CacheLine != 0 {
			t.Errorf("%d stripes: the array starts at %#x, not on a line", n, a)
		}
	}
}

// TestNoSharedLines checks that no two stripes' slots arrays and arenas,
// the memory a spend writes, share a cache line, and that each starts on
// one. Before they were allocated on whole lines (flatmap.Map on
// layout.Lines), a stripe's table of 18 slots (288 bytes, a size class
// the allocator packs at multiples of 288) shared a line with its
// neighbour's, so that spends on keys of two stripes, under two locks,
// took the line from each other (false sharing).
func TestNoSharedLines(t *testing.T) {
	s, err := New(limitForTest, WithStripes(64), keyrate.WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2000 { // 31 keys a stripe on average: tables of 8 to 60 slots
		s.Allow(fmt.Sprintf("key-%d", k))
	}
	type extent struct {
		stripe     int
		first, end uintptr // lines
	}
	var all []extent
	for i := range s.tab.stripes {
		for j, e := range s.tab.stripes[i].m.Extents() {
			if e[1] == e[0] {
				continue
			}
			if e[0]%layout.CacheLine != 0 {
				t.Errorf("stripe %d: array %d starts at %#x, not on a line", i, j, e[0])
			}
			all = append(all, extent{i, line(e[0]), line(e[1] - 1)})
		}
	}
	if len(all) < 2*len(s.tab.stripes) {
		t.Fatalf("%d arrays in %d stripes: the keys did not fill them", len(all), len(s.tab.stripes))
	}
	slices.SortFunc(all, func(a, b extent) int { return int(a.first) - int(b.first) })
	for k := 1; k < len(all); k++ {
		if a, b := all[k-1], all[k]; a.end >= b.first && a.stripe != b.stripe {
			t.Errorf("stripes %d and %d write to line %#x", a.stripe, b.stripe, b.first*layout.CacheLine)
		}
	}
}

var limitForTest = keyrate.PerSecond(10)
