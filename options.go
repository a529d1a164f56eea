package keyrate

import (
	"fmt"

	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/isnil"
	"github.com/keyrate/keyrate/internal/settings"
)

// Option configures a store. The options every store accepts are in this
// package; options for one store live in that store's package, and a store
// given another store's option fails with ErrInvalidOption.
//
// A store's New applies its options in order. Of an option given twice the
// later wins, except WithPolicies, whose policies add to an earlier one's
// (a name given twice is then an error); a nil Option, and WithClock(nil)
// or WithObserver(nil), change nothing. New returns the error of the first
// invalid option.
type Option func(*settings.Settings[Policy])

// WithClock makes the store read time from c instead of clock.System(). A
// nil c keeps the default; a typed nil (such as a nil *clock.Manual), whose
// every reading would panic, makes New fail with ErrInvalidOption.
func WithClock(c clock.Clock) Option {
	return func(s *settings.Settings[Policy]) {
		switch {
		case s.Err != nil || c == nil:
		case isnil.Is(c):
			s.Err = fmt.Errorf("%w: WithClock: a nil %T", ErrInvalidOption, c)
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
	return func(s *settings.Settings[Policy]) {
		if s.Err == nil {
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
	return func(s *settings.Settings[Policy]) {
		switch {
		case s.Err != nil:
		case f == nil:
			s.Err = fmt.Errorf("%w: WithPolicyFunc: a nil function", ErrInvalidOption)
		default:
			s.PolicyFunc = f
		}
	}
}

// WithObserver makes the store tell o of every decision (see Observer):
// the in-process stores and redisbucket accept it. The default is none,
// which costs a store one nil check per call. A nil o keeps the default; a
// typed nil (such as a nil *keyrateprom.Metrics), whose every call would
// panic, makes New fail with ErrInvalidOption.
func WithObserver(o Observer) Option {
	return func(s *settings.Settings[Policy]) {
		switch {
		case s.Err != nil || o == nil:
		case isnil.Is(o):
			s.Err = fmt.Errorf("%w: WithObserver: a nil %T", ErrInvalidOption, o)
		default:
			s.Observer = o
		}
	}
}
