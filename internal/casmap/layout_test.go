package casmap

import (
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate/internal/layout"
)

// TestSegmentPadding asserts that a segment fills a whole number of cache
// lines, so that neighbouring segments' locks and table pointers never
// share one, and that a slot is the 16 bytes the documentation counts.
func TestSegmentPadding(t *testing.T) {
	if got := unsafe.Sizeof(Segment{}); got%layout.CacheLine != 0 {
		t.Errorf("unsafe.Sizeof(Segment{}) = %d, want a multiple of %d", got, layout.CacheLine)
	}
	if got := unsafe.Sizeof(slot{}); got != 16 {
		t.Errorf("unsafe.Sizeof(slot{}) = %d, want 16", got)
	}
}
