package httplimit

import (
	"fmt"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/isnil"
)

// WithObserver makes the middleware tell o of each request it decides
// (see keyrate.Observer), with what only it knows: Event.Shadow is set
// under WithShadow, whose denials are let through, and a request without
// a key is reported with Err wrapping ErrNoKey (and keyrate.ErrInvalidKey)
// rather than being lost; one the key function failed on (a client address
// that does not parse, ByFunc's error) with Err wrapping both that error
// and keyrate.ErrInvalidKey, a failure to key it, not the store's. Give an observer to the middleware or to the
// store (keyrate.WithObserver), not both: each would report every request.
// The default is none. A typed nil o makes New fail with an error.
//
// A Request the store decided is reported under the decision's policy. One
// it could not (a store error) is reported under the tier the request asked
// for, or keyrate.DefaultPolicy: the middleware cannot know which policy a
// store's WithPolicyFunc chose. Give the observer to the store to count
// such errors per policy.
func WithObserver(o keyrate.Observer) Option {
	return func(c *config) {
		switch {
		case o == nil:
		case isnil.Is(o):
			c.fail(fmt.Errorf("%w: httplimit.WithObserver: a nil %T", keyrate.ErrInvalidOption, o))
		default:
			c.observer = o
		}
	}
}

// observe tells the observer of a request decided under policy (the
// decision's; "" when there is none) that allowed or denied cost, or
// failed with err; slot is the tier's slot, nil for the default policy.
// Callers test m.observer first.
func (m *middleware) observe(key string, slot *policySlot, cost int, policy string, allowed bool, err error) {
	if policy == "" {
		policy = keyrate.DefaultPolicy
		if slot != nil {
			policy = slot.name
		}
	}
	m.observer.Observe(keyrate.Event{Key: key, Policy: policy, Cost: cost, Allowed: allowed, Err: err, Shadow: m.shadow})
}
