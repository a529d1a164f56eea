package striped

import (
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/layout"
)

// TestStripePadding asserts that a stripe fills exactly one cache line, so
// that neighbouring stripes' mutexes never share one.
func TestStripePadding(t *testing.T) {
	if got := unsafe.Sizeof(stripe{}); got != layout.CacheLine {
		t.Fatalf("unsafe.Sizeof(stripe{}) = %d, want %d", got, layout.CacheLine)
	}
}

var limitForTest = keyrate.PerSecond(10)
