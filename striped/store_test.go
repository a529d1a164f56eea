package striped_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/striped"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Store{
		New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
			s, err := striped.New(limit, keyrate.WithClock(clk))
			if err != nil {
				return nil, err // a typed nil *Store would not compare equal to nil
			}
			return s, nil
		},
	})
}

// bounded is the store under the cross-store eviction checks.
var bounded = conformance.Bounded{
	Name: "striped",
	New: func(tb testing.TB, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) (keyrate.BoundedLimiter, error) {
		s, err := striped.New(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
		if err != nil {
			return nil, err // a typed nil *Store would not compare equal to nil
		}
		return s, nil
	},
}

func TestEviction(t *testing.T) { conformance.RunEviction(t, bounded) }

// TestConformanceHashed runs the whole suite with keyrate.WithHashedKeys.
func TestConformanceHashed(t *testing.T) {
	conformance.Run(t, conformance.Store{
		New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
			return bounded.New(t, limit, clk, keyrate.WithHashedKeys())
		},
	})
}

// BenchmarkSweep: Allow latency on a 1M-key store with and without a
// concurrent sweep. See conformance.BenchSweep.
func BenchmarkSweep(b *testing.B) { conformance.BenchSweep(b, bounded) }

// BenchmarkKeyMemory: bytes per key with and without hashed keys. See
// conformance.BenchKeyMemory.
func BenchmarkKeyMemory(b *testing.B) { conformance.BenchKeyMemory(b, bounded) }

// TestEvictionOneStripe runs the eviction checks with every key on one
// stripe, where every insertion's sample sees every other key.
func TestEvictionOneStripe(t *testing.T) {
	one := bounded
	one.New = func(tb testing.TB, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) (keyrate.BoundedLimiter, error) {
		return bounded.New(tb, limit, clk, append([]keyrate.Option{striped.WithStripes(1)}, opts...)...)
	}
	conformance.RunEviction(t, one)
}
