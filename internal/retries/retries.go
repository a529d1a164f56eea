// Package retries counts the failed compare-and-swaps of atomicbucket's
// lock-free spend: each one is a retry of the transition because another
// goroutine changed the key's word between the load and the swap. The
// benchmarks report the count per operation (retries/op), which says how
// much of a hot key's cost is contention rather than arithmetic.
//
// The count is process-wide and only grows. Counting costs nothing on a
// swap that succeeds; a failed one adds to a striped counter (xsync's),
// so that counting does not itself become a contended cache line.
package retries

import "github.com/puzpuzpuz/xsync/v3"

var failed = xsync.NewCounter()

// Add counts one failed compare-and-swap.
func Add() { failed.Inc() }

// Total returns the failed compare-and-swaps counted so far.
func Total() int64 { return failed.Value() }
