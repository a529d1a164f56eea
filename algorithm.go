package keyrate

import "fmt"

// Algorithm is how a Limit counts a key's requests. The zero Algorithm is
// TokenBucket. Every store carries every algorithm but SlidingLog in the
// one 64-bit state, so that all of them, the lock-free one included, run
// each algorithm with no change to how they synchronise.
//
// With N = Rate and W = Per, and time t counted from the store's epoch
// (its clock reading when it was built, so that windows are aligned to
// it), a request of cost c is allowed under:
//
//   - TokenBucket: if the bucket holds c tokens (Rate tokens every Per, up
//     to Burst). Over any interval of length T it admits at most
//     Burst + Rate·T/Per.
//   - FixedWindow: if the window ⌊t/W⌋ has admitted at most N − c.
//     Each aligned window admits at most N, but an interval of length W
//     across a boundary can see up to 2N.
//   - SlidingWindow: the sliding-window counter, a weighted estimate from
//     the previous window's count p and the current one's q: with
//     e = t mod W, allowed iff p·(W − e) + (q + c)·W ≤ N·W. Each aligned
//     window admits at most N; an interval of length W admits less than
//     2N, and exactly at most N when the previous window's requests were
//     spread evenly over it.
//   - SlidingLog: the sliding-window log, exact: allowed iff the cost
//     admitted in (t − W, t] plus c is at most N. Any interval of length
//     W admits at most N. It keeps each key's admissions within the last
//     window (up to N entries of 12 bytes, N at most MaxLogRate), so it
//     cannot live in one word: mutexbucket and striped carry it beside
//     the key's bucket; atomicbucket refuses it with
//     ErrUnsupportedAlgorithm, and redisbucket with ErrInvalidLimit. A
//     SlidingLog limit must be its policy's only window. It never waits: Reserve and Wait under it return
//     ErrUnsupportedAlgorithm; Refund gives cost back off the newest
//     admissions. A reading older than one the key has seen is decided
//     at the latest one.
//
// A Limit of any algorithm but TokenBucket has Burst equal to Rate: build
// one with Limit.Using. Integer arithmetic only, as for the token bucket.
type Algorithm uint8

// The algorithms. See Algorithm.
const (
	TokenBucket Algorithm = iota
	FixedWindow
	SlidingWindow
	SlidingLog
	numAlgorithms
)

// MaxLogRate is the largest Rate a SlidingLog limit may have: a key's log
// holds up to Rate entries of 12 bytes, allocated with its bucket (768 KiB
// at MaxLogRate).
const MaxLogRate = 1 << 16

var algorithmNames = [numAlgorithms]string{"token-bucket", "fixed-window", "sliding-window", "sliding-log"}

// String returns the algorithm's name, as ParseAlgorithm reads it:
// "token-bucket", "fixed-window", "sliding-window" or "sliding-log".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// Windowed reports whether a counts requests in aligned windows:
// FixedWindow and SlidingWindow.
func (a Algorithm) Windowed() bool { return a == FixedWindow || a == SlidingWindow }

// ParseAlgorithm returns the algorithm named s (see Algorithm.String), or
// an error wrapping ErrInvalidLimit that lists the names.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, n := range algorithmNames {
		if s == n {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q is not one of token-bucket, fixed-window, sliding-window, sliding-log", ErrInvalidLimit, s)
}

// Using returns a copy of l that counts with algorithm a. For any
// algorithm but TokenBucket the limit is then Rate requests per window of
// length Per, and Burst is set to Rate (they have no separate burst):
//
//	keyrate.PerMinute(100).Using(keyrate.SlidingWindow) // 100 in any minute, estimated
//	keyrate.PerMinute(100).Using(keyrate.SlidingLog)    // 100 in any minute, exactly
func (l Limit) Using(a Algorithm) Limit {
	l.Algorithm = a
	if a != TokenBucket {
		l.Burst = l.Rate
	}
	return l
}
