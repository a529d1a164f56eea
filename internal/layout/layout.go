// Package layout holds the memory-layout helpers keyrate's stores share.
package layout

import "unsafe"

// CacheLine is the size, in bytes, that padded structures round up to so
// that two of them never share a cache line (false sharing). 64 bytes is
// the line size of current x86-64 and most arm64 cores; Apple's M-series
// and some server arm64 parts fetch lines in pairs (128 bytes), where 64
// still avoids sharing a line but not the adjacent-line prefetch.
const CacheLine = 64

// NextPow2 returns the least power of two that is at least n, and 1 for
// n < 1.
func NextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Lines returns a byte slice of length n whose first byte starts a cache
// line and whose capacity runs to the end of a line, n rounded up to whole
// lines: memory that shares no line with any other object, so that a
// store's writes to it never invalidate a line another core reads for
// something else (false sharing). The allocator gives a small object no
// such alignment: it packs objects of one size class side by side, at
// multiples of the class's size (288 bytes, for one), so this allocates
// one line more than it returns and starts at the first boundary in it.
// The memory holds no pointers; n must be at least 0.
func Lines(n int) []byte {
	whole := (n + CacheLine - 1) &^ (CacheLine - 1)
	raw := make([]byte, whole+CacheLine-1)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (CacheLine - 1))
	return raw[skip : skip+n : skip+whole]
}
