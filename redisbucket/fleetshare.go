package redisbucket

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/wrap"
)

// MaxFallbackNodes is the most nodes WithFallbackNodes accepts.
const MaxFallbackNodes = 1 << 16

// WithFallbackNodes makes FallbackLocal's in-process store enforce 1/n of
// every limit, so that a fleet of n processes answering from their
// fallbacks during an outage together stay within each limit: every
// window of every policy (the WithFallbackLimit limit included, and the
// policies SetPolicy sets later) keeps its Rate but over n times its Per
// (where n·Per overflows a time.Duration, Rate/g over n/g times the Per,
// g = gcd(Rate, n); or else one token every ⌈n·Per/Rate⌉: never more
// than 1/n of the rate), and gets a Burst of Burst/n, rounded down, but
// at least 1; a window algorithm's window (keyrate.FixedWindow,
// SlidingWindow, SlidingLog) keeps its Per and counts Rate/n, rounded
// down, but at least 1 (the fallback store, atomicbucket, refuses a log,
// so New refuses FallbackLocal under a log policy). Give it the number
// of processes that share the Redis buckets. New returns an error
// wrapping keyrate.ErrInvalidOption for n out of 1 to MaxFallbackNodes or
// a failure policy other than FallbackLocal, and one wrapping
// keyrate.ErrInvalidLimit if a divided limit is out of keyrate's range (a
// token every n·Per/Rate beyond the longest time.Duration, or a Burst/n
// that takes longer than keyrate allows to fill at that rate: see
// keyrate.Limit.Validate). The default is 1: each process's fallback
// enforces the whole limit, so a fleet of N admits up to N times it
// during an outage.
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
//     is at least 1). A count below the real
//     fleet's admits that much more: N real processes with
//     WithFallbackNodes(n) admit up to N/n of the fallbacks' part. A
//     window algorithm's fallbacks, each counting max(⌊Rate/N⌋, 1) in
//     windows aligned to its own creation, admit up to twice that,
//     2·max(⌊Rate/N⌋, 1) each, over an interval of length Per that spans
//     two of their windows: 2·(m/N)·Rate, plus 2·m where Rate < N (each
//     share counts at least 1).
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

// share returns 1/n of l, never more. A token bucket keeps its Rate over
// n times its Per; where that overflows a time.Duration, its rate in
// lowest terms, Rate/g over n/g times the Per (g = gcd(Rate, n)); where
// that overflows too, one token every ⌈n·Per/Rate⌉ ns, rounded against
// the fleet by less than 1ns a token. Its Burst is Burst/n, at least 1.
// A window algorithm's limit counts Rate/n, at least 1, in the same
// window. It returns an error wrapping keyrate.ErrInvalidLimit, naming l,
// n and the bound, if the share is out of keyrate's range: a token every
// ⌈n·Per/Rate⌉ beyond the longest time.Duration, or one that keyrate's
// Limit.Validate refuses (a Burst that takes too long to fill).
func share(l keyrate.Limit, n int) (keyrate.Limit, error) {
	if n <= 1 {
		return l, nil
	}
	s := l
	switch g := timeN(int(gcd(uint64(l.Rate), uint64(n)))); {
	case l.Algorithm != keyrate.TokenBucket:
		s.Rate = max(l.Rate/n, 1)
		s.Burst = s.Rate
	case l.Per <= math.MaxInt64/timeN(n):
		s.Per = l.Per * timeN(n)
	case l.Per <= math.MaxInt64/(timeN(n)/g):
		s.Rate, s.Per = l.Rate/int(g), l.Per*(timeN(n)/g)
	default: // n·Per < 2^79: a token every ⌈n·Per/Rate⌉
		hi, lo := bits.Mul64(uint64(n), uint64(l.Per))
		var q, r uint64
		if hi < uint64(l.Rate) {
			q, r = bits.Div64(hi, lo, uint64(l.Rate))
		}
		if hi >= uint64(l.Rate) || q > math.MaxInt64 || q == math.MaxInt64 && r > 0 {
			return keyrate.Limit{}, fmt.Errorf("%w: %v shared among %d fallback nodes: a token every %d·%v/%d is beyond the longest time.Duration, %v",
				keyrate.ErrInvalidLimit, l, n, n, l.Per, l.Rate, time.Duration(math.MaxInt64))
		}
		if r > 0 {
			q++ // against the fleet
		}
		s.Rate, s.Per = 1, time.Duration(q)
	}
	if l.Algorithm == keyrate.TokenBucket {
		s.Burst = max(l.Burst/n, 1)
	}
	if err := s.Validate(); err != nil {
		return keyrate.Limit{}, wrap.Errorf("%w: %v shared among %d fallback nodes is %v: %w", keyrate.ErrInvalidLimit, l, n, s, err)
	}
	return s, nil
}

// sharePolicy returns p with every window's limit shared among n nodes,
// or an error wrapping keyrate.ErrInvalidPolicy and share's.
func sharePolicy(p keyrate.Policy, n int) (keyrate.Policy, error) {
	if n <= 1 || len(p.Limits) == 0 {
		return p, nil
	}
	ls := make([]keyrate.Limit, len(p.Limits))
	for i, l := range p.Limits {
		var err error
		if ls[i], err = share(l, n); err != nil {
			return keyrate.Policy{}, wrap.Errorf("%w: %q window %d: %w", keyrate.ErrInvalidPolicy, p.Name, i, err)
		}
	}
	p.Limits = ls
	return p, nil
}

// timeN is n as a time.Duration factor.
func timeN(n int) time.Duration { return time.Duration(n) }
