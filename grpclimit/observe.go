package grpclimit

import (
	"fmt"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/isnil"
)

// WithObserver makes the interceptors tell o of each call they decide
// (see keyrate.Observer), with what only they know: Event.Shadow is set
// under WithShadow, whose denials are let through, and a call without a
// key is reported with Err wrapping ErrNoKey (and keyrate.ErrInvalidKey);
// one the key function failed on (ErrNoPeer, ByFunc's error) with Err
// wrapping both that error and keyrate.ErrInvalidKey, a failure to key it,
// not the store's.
// Give an observer to the interceptor or to the store
// (keyrate.WithObserver), not both: each would report every call. The
// default is none. A typed nil o makes New fail with an error.
//
// A Call the store decided is reported under the decision's policy. One
// it could not (a store error) is reported under the tier the call asked
// for, or keyrate.DefaultPolicy: the middleware cannot know which policy a
// store's WithPolicyFunc chose. Give the observer to the store to count
// such errors per policy.
func WithObserver(o keyrate.Observer) Option {
	return func(c *config) {
		switch {
		case o == nil:
		case isnil.Is(o):
			c.fail(fmt.Errorf("%w: grpclimit.WithObserver: a nil %T", keyrate.ErrInvalidOption, o))
		default:
			c.observer = o
		}
	}
}

// observe tells the observer of a call decided under policy that allowed
// or denied cost, or failed with err. Callers test in.observer first.
func (in *Interceptor) observe(key, policy string, cost int, allowed bool, err error) {
	in.observer.Observe(keyrate.Event{Key: key, Policy: policy, Cost: cost, Allowed: allowed, Err: err, Shadow: in.shadow})
}
