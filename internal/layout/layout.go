// Package layout holds the memory-layout helpers keyrate's stores share.
package layout

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
