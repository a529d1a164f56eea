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
}

var limitForTest = keyrate.PerSecond(10)
