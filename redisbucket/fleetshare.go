package redisbucket

import (
	"fmt"
	"math"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
)

// MaxFallbackNodes is the most nodes WithFallbackNodes accepts.
const MaxFallbackNodes = 1 << 16

// WithFallbackNodes makes FallbackLocal's in-process store enforce 1/n of
// every limit, so that a fleet of n processes answering from their
// fallbacks during an outage together stay within each limit: every
// window of every policy (the WithFallbackLimit limit included, and the
// policies SetPolicy sets later) keeps its Rate but over n times its Per,
// and gets a Burst of Burst/n, rounded down, but at least 1; a window
// algorithm's window (keyrate.FixedWindow, SlidingWindow, SlidingLog)
// keeps its Per and counts Rate/n, rounded down, but at least 1 (the
// fallback store, atomicbucket, refuses a log, so New refuses
// FallbackLocal under a log policy). Give it the
// number of processes that share the Redis buckets. New returns an error
// wrapping keyrate.ErrInvalidOption for n out of 1 to MaxFallbackNodes or
// a failure policy other than FallbackLocal, and one wrapping
// keyrate.ErrInvalidLimit if a divided limit is out of range. The default
// is 1: each process's fallback enforces the whole limit, so a fleet of N
// admits up to N times it during an outage.
//
// The fleet's overshoot bound of each failure policy, for one key over any
// interval of length T, given N processes of which m answer from their
// fallback:
//
//   - FailClosed: none: only Redis admits, within Burst + Rate·T/Per.
//   - FailOpen: no bound: every request during the outage is admitted.
//   - FallbackLocal: Redis's admissions plus each fallback's, whose
//     buckets start full when it takes over: up to (1 + m)·(Burst +
//     Rate·T/Per) without this option; with WithFallbackNodes(N), at most
//     2·(Burst + Rate·T/Per) (Redis's part, and the fallbacks' part,
//     m/N ≤ 1 of it), plus m·1 tokens where Burst < N (each share's Burst
//     is at least 1). A count below the real fleet's admits that much
//     more: N real processes with WithFallbackNodes(n) admit up to N/n of
//     the fallbacks' part. A window algorithm's fallbacks, each aligned
//     to its own creation, admit up to twice their share, 2·⌊Rate/n⌋
//     each, over an interval of length Per that spans two of their
//     windows.
//
// The deny cache (WithDenyCache) and the circuit breaker (WithBreaker) add
// no overshoot: the cache only denies, and the open breaker answers by the
// failure policy, as above.
func WithFallbackNodes(n int) keyrate.Option {
	return config.StoreOption("redisbucket.WithFallbackNodes", func(s *settings) error {
		if n < 1 || n > MaxFallbackNodes {
			return fmt.Errorf("fallback nodes %d is not from 1 to %d", n, MaxFallbackNodes)
		}
		s.fallbackNodes = n
		return nil
	})
}

// share returns 1/n of l: the same Rate over n times the Per (or, where
// that overflows, Rate/n over the Per), and a Burst of Burst/n, at least 1;
// for a window algorithm, Rate/n (at least 1) in the same window.
func share(l keyrate.Limit, n int) keyrate.Limit {
	if n <= 1 {
		return l
	}
	if l.Algorithm != keyrate.TokenBucket {
		l.Rate = max(l.Rate/n, 1)
		l.Burst = l.Rate
		return l
	}
	if l.Per <= math.MaxInt64/timeN(n) {
		l.Per *= timeN(n)
	} else {
		l.Rate = max(l.Rate/n, 1)
	}
	l.Burst = max(l.Burst/n, 1)
	return l
}

// sharePolicy returns p with every window's limit shared among n nodes.
func sharePolicy(p keyrate.Policy, n int) keyrate.Policy {
	if n <= 1 || len(p.Limits) == 0 {
		return p
	}
	ls := make([]keyrate.Limit, len(p.Limits))
	for i, l := range p.Limits {
		ls[i] = share(l, n)
	}
	p.Limits = ls
	return p
}

// timeN is n as a time.Duration factor.
func timeN(n int) time.Duration { return time.Duration(n) }
