package layout

import (
	"testing"
	"unsafe"
)

func TestNextPow2(t *testing.T) {
	for _, c := range []struct{ in, want int }{{-3, 1}, {0, 1}, {1, 1}, {2, 2}, {3, 4}, {8, 8}, {9, 16}, {1000, 1024}} {
		if got := NextPow2(c.in); got != c.want {
			t.Errorf("NextPow2(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestLines checks that Lines returns whole cache lines of its own: its
// first byte at a boundary, its capacity to the next boundary, and the
// length asked for, whatever the size class the allocator would pick.
func TestLines(t *testing.T) {
	for n := 0; n <= 4*CacheLine+1; n++ {
		b := Lines(n)
		if len(b) != n {
			t.Fatalf("len(Lines(%d)) = %d", n, len(b))
		}
		if c := cap(b); c%CacheLine != 0 || c < n || c >= n+CacheLine {
			t.Fatalf("cap(Lines(%d)) = %d, want %d rounded up to a multiple of %d", n, c, n, CacheLine)
		}
		if a := uintptr(unsafe.Pointer(unsafe.SliceData(b))); n > 0 && a%CacheLine != 0 {
			t.Fatalf("Lines(%d) starts at %#x, not on a %d-byte boundary", n, a, CacheLine)
		}
	}
}
