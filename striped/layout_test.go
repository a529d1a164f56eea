package striped

import (
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/layout"
)

// TestStripePadding asserts that a stripe fills a whole number of cache
// lines, so that neighbouring stripes' mutexes never share one.
func TestStripePadding(t *testing.T) {
	if got := unsafe.Sizeof(stripe{}); got%layout.CacheLine != 0 {
		t.Errorf("unsafe.Sizeof(stripe{}) = %d, want a multiple of %d", got, layout.CacheLine)
	}
	// On a 64-bit platform a stripe is two lines, its lock at the start
	// of the first (the hot path's address arithmetic is then one shift):
	// a field more, such as the maps' seed held by value rather than by
	// pointer, would make it three.
	if unsafe.Sizeof(uintptr(0)) == 8 {
		if got := unsafe.Sizeof(stripe{}); got > 2*layout.CacheLine {
			t.Errorf("unsafe.Sizeof(stripe{}) = %d, want at most %d", got, 2*layout.CacheLine)
		}
	}
}

var limitForTest = keyrate.PerSecond(10)
