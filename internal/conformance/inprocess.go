package conformance

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// InProcess describes an in-process store for the whole suite, from its
// New: the store reads the test's manual clock (keyrate.WithClock), and a
// failed New yields a nil Limiter rather than a typed nil pointer, which
// would not compare equal to nil.
func InProcess[S keyrate.BoundedLimiter](name string, newStore func(keyrate.Limit, ...keyrate.Option) (S, error)) Bounded {
	return Bounded{
		Name: name,
		New: func(_ testing.TB, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) (keyrate.BoundedLimiter, error) {
			s, err := newStore(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	}
}

// Store returns b, built with opts added, as a Store for Run.
func (b Bounded) Store(opts ...keyrate.Option) Store {
	return Store{New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
		l, err := b.New(t, limit, clk, opts...)
		if err != nil {
			return nil, err
		}
		return l, nil
	}}
}

// With returns b with opts given to every store it builds, before the
// options of each call.
func (b Bounded) With(opts ...keyrate.Option) Bounded {
	inner := b.New
	b.New = func(tb testing.TB, limit keyrate.Limit, clk *clock.Manual, more ...keyrate.Option) (keyrate.BoundedLimiter, error) {
		return inner(tb, limit, clk, append(append([]keyrate.Option(nil), opts...), more...)...)
	}
	return b
}
