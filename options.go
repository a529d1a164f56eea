package keyrate

import (
	"fmt"
	"time"

	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Option configures a store. The options every store accepts are in this
// package; options for one store live in that store's package and are built
// with StoreOption.
type Option func(*Settings)

// Settings is the configuration that Configure resolves from options. Stores
// read it; users set it through Options.
type Settings struct {
	// Clock is the time source. The default is clock.System().
	Clock clock.Clock

	// MaxKeys is the most keys the store tracks at once; 0, the default,
	// is no limit. Set with WithMaxKeys.
	MaxKeys int

	// SweepInterval is the period of the store's background sweeper; 0,
	// the default, starts none. Set with WithSweepInterval.
	SweepInterval time.Duration

	// HashedKeys makes the store keep a seeded 64-bit hash of each key
	// instead of the key. The default is false. Set with WithHashedKeys.
	HashedKeys bool

	store any   // the store's own settings, for StoreOption
	err   error // the first option that did not apply
}

// WithClock makes the store read time from c instead of clock.System(). A
// nil c keeps the default; a typed nil (such as a nil *clock.Manual), whose
// every reading would panic, makes New fail with ErrInvalidOption.
func WithClock(c clock.Clock) Option {
	return func(s *Settings) {
		switch {
		case s.err != nil || c == nil:
		case isnil.Is(c):
			s.err = fmt.Errorf("%w: WithClock: a nil %T", ErrInvalidOption, c)
		default:
			s.Clock = c
		}
	}
}

// StoreOption returns an Option, named name in errors, that applies set to
// a store's own settings of type T. Given to a store whose settings are not
// a T, the option makes Configure fail with ErrInvalidOption.
func StoreOption[T any](name string, set func(*T) error) Option {
	return func(s *Settings) {
		if s.err != nil {
			return
		}
		t, ok := s.store.(*T)
		if !ok {
			s.err = fmt.Errorf("%w: %s does not apply to this store", ErrInvalidOption, name)
			return
		}
		if err := set(t); err != nil {
			s.err = fmt.Errorf("%w: %s: %w", ErrInvalidOption, name, err)
		}
	}
}

// Configure applies opts in order over the defaults and returns the
// resulting settings. store points to the calling store's own settings,
// which options made with StoreOption fill in; it may be nil for a store
// that has none.
func Configure(store any, opts ...Option) (Settings, error) {
	s := Settings{Clock: clock.System(), store: store}
	for _, opt := range opts {
		if opt != nil {
			opt(&s)
		}
	}
	if s.err != nil {
		return Settings{}, s.err
	}
	s.store = nil
	return s, nil
}
