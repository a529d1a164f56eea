package striped

import (
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/layout"
)

// TestStripePadding asserts that a stripe fills exactly one cache line, so
// that neighbouring stripes' mutexes never share one, whatever the key type.
func TestStripePadding(t *testing.T) {
	for name, got := range map[string]uintptr{
		"stripe[string]": unsafe.Sizeof(stripe[string]{}),
		"stripe[uint64]": unsafe.Sizeof(stripe[uint64]{}),
	} {
		if got != layout.CacheLine {
			t.Errorf("unsafe.Sizeof(%s{}) = %d, want %d", name, got, layout.CacheLine)
		}
	}
}

var limitForTest = keyrate.PerSecond(10)
