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

	// EvictionGrace is how long a bucket must have been full before a
	// store's routine maintenance evicts it. The default is
	// DefaultEvictionGrace. Set with WithEvictionGrace.
	EvictionGrace time.Duration

	// Policies are the named policies a store enforces besides its
	// default. Set with WithPolicies.
	Policies []Policy

	// PolicyFunc chooses the policy for a key in Allow and AllowN. The
	// default, nil, is the default policy for every key. Set with
	// WithPolicyFunc.
	PolicyFunc func(key string) string

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

// WithPolicies gives the store named policies besides its default (the
// Limit given to New): pick one per request with the store's Tier and
// AllowTier, or per key with WithPolicyFunc. A policy named DefaultPolicy
// replaces the default. Every in-process store accepts it; its policies
// can be changed and added to at runtime with the store's SetPolicy. The
// default is none. Policies are validated by New, which returns an error
// wrapping ErrInvalidPolicy for an invalid one or a repeated name.
func WithPolicies(ps ...Policy) Option {
	return func(s *Settings) {
		if s.err == nil {
			s.Policies = append(s.Policies, ps...)
		}
	}
}

// WithPolicyFunc makes Allow and AllowN decide each key under the policy
// f names for it: the empty name is the default policy, and a name the
// store does not have makes AllowN return an error wrapping
// ErrUnknownPolicy (and Allow false). f is called once per request, on
// the request's goroutine, and must be safe for concurrent use; it should
// be as cheap as a map lookup. A key may move from one policy to another
// at any time: its state is carried over as SetPolicy describes. The
// default is the default policy for every key; a nil f is an error.
func WithPolicyFunc(f func(key string) string) Option {
	return func(s *Settings) {
		switch {
		case s.err != nil:
		case f == nil:
			s.err = fmt.Errorf("%w: WithPolicyFunc: a nil function", ErrInvalidOption)
		default:
			s.PolicyFunc = f
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
	s := Settings{Clock: clock.System(), EvictionGrace: DefaultEvictionGrace, store: store}
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
