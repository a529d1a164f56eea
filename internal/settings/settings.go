// Package settings holds the configuration that keyrate's options set and
// its stores read. It is generic in the policy type, keyrate.Policy,
// because keyrate imports it and it cannot import keyrate; the stores use
// it as config.Settings.
package settings

import (
	"time"

	"github.com/keyrate/keyrate/clock"
)

// Settings is the configuration that config.Configure resolves from
// keyrate's options; P is keyrate.Policy. Stores read it; users set it
// through keyrate's Options.
type Settings[P any] struct {
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
	Policies []P

	// PolicyFunc chooses the policy for a key in Allow and AllowN. The
	// default, nil, is the default policy for every key. Set with
	// WithPolicyFunc.
	PolicyFunc func(key string) string

	// Observer is the keyrate.Observer told of every decision, nil for
	// none (the default). Set with WithObserver. (It is held as any
	// because this package cannot import keyrate.)
	Observer any

	// Own is the store's own settings, which options made with
	// config.StoreOption fill in, while options apply; nil afterwards.
	Own any
	// Err is the first option that did not apply; options after it do
	// nothing.
	Err error
}
