// Package config resolves a store's keyrate.Options into its settings:
// the options every store shares, set in package keyrate, and the
// store's own, built with StoreOption.
package config

import (
	"fmt"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/settings"
	"github.com/keyrate/keyrate/internal/wrap"
)

// Settings is the configuration that Configure resolves from options.
// Stores read it; users set it through keyrate's Options.
type Settings = settings.Settings[keyrate.Policy]

// StoreOption returns an Option, named name in errors, that applies set to
// a store's own settings of type T. Given to a store whose settings are not
// a T, the option makes Configure fail with keyrate.ErrInvalidOption.
func StoreOption[T any](name string, set func(*T) error) keyrate.Option {
	return func(s *Settings) {
		if s.Err != nil {
			return
		}
		t, ok := s.Own.(*T)
		if !ok {
			s.Err = fmt.Errorf("%w: %s does not apply to this store", keyrate.ErrInvalidOption, name)
			return
		}
		if err := set(t); err != nil {
			s.Err = wrap.Errorf("%w: %s: %w", keyrate.ErrInvalidOption, name, err)
		}
	}
}

// Configure applies opts in order over the defaults and returns the
// resulting settings. own points to the calling store's own settings,
// which options made with StoreOption fill in; it may be nil for a store
// that has none.
func Configure(own any, opts ...keyrate.Option) (Settings, error) {
	s := Settings{Clock: clock.System(), EvictionGrace: keyrate.DefaultEvictionGrace, Own: own}
	for _, opt := range opts {
		if opt != nil {
			opt(&s)
		}
	}
	if s.Err != nil {
		return Settings{}, s.Err
	}
	s.Own = nil
	return s, nil
}
