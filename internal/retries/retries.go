// Package retries counts the failed compare-and-swaps of atomicbucket's
// lock-free spend: each one is a retry of the transition because another
// goroutine changed the key's word between the load and the swap. The
// benchmarks report the count per operation (retries/op), which says how
// much of a hot key's cost is contention rather than arithmetic.
//
// The count is process-wide and only grows. Counting costs nothing on a
// swap that succeeds; a failed one adds to one of several counters, each
// on a cache line of its own, picked by the caller's clock reading, so
// that counting does not itself become one more contended line. Add is
// inlined and calls nothing, so that the spend loop stays a leaf
// function without a stack frame.
package retries

import "sync/atomic"

// shards is the number of counters; a power of two.
const shards = 16

// shard is one counter, alone on its cache line.
type shard struct {
	n atomic.Int64
	_ [56]byte
}

var failed [shards]shard

// Add counts one failed compare-and-swap; spread is any value that
// differs between concurrent callers more often than not (a clock
// reading), which picks the counter.
func Add(spread uint64) { failed[spread%shards].n.Add(1) }

// Total returns the failed compare-and-swaps counted so far.
func Total() int64 {
	var n int64
	for i := range failed {
		n += failed[i].n.Load()
	}
	return n
}
