package keyrate

import (
	"fmt"

	"github.com/keyrate/keyrate/internal/wrap"
)

// DefaultPolicy is the name of a store's default policy: the one built
// from the Limit given to New, which Allow and AllowN enforce on every key
// unless WithPolicyFunc says otherwise. Decisions made under it name it.
const DefaultPolicy = "default"

// MaxLimits is the most limits (windows) one Policy can hold.
const MaxLimits = 8

// Policy is a named set of limits enforced together on each key under it,
// all or nothing: a request of cost c is allowed only if every window
// holds c tokens, and then spends c from every one; a denied request
// spends from none. Over any interval of length T, each window i admits at
// most Limits[i].Burst + Limits[i].Rate·T/Limits[i].Per tokens.
//
// A typical two-window policy caps bursts and a quota at once:
//
//	keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{
//		keyrate.PerSecond(10),  // at most 10 at once, 10 a second
//		keyrate.PerHour(1000),  // and at most 1000 an hour
//	}}
//
// A policy with Unlimited set admits every request, stores nothing and
// has no Limits (see Unlimited). Give a store its policies with
// WithPolicies; pick one per call with a store's Tier, or per key with
// WithPolicyFunc.
type Policy struct {
	// Name identifies the policy: in a store's Tier and SetPolicy, in
	// Decision.Policy, and in rate-limit headers. It must not be empty.
	Name string
	// Limits are the policy's windows, from 1 to MaxLimits of them,
	// enforced together. Their order names them in a Decision's Window;
	// a change of policy matches windows by length, not position (see
	// PolicyLimiter).
	Limits []Limit
	// Unlimited makes the policy admit every request without counting it:
	// Limits must then be empty.
	Unlimited bool
}

// Unlimited returns the policy named name that admits every request.
func Unlimited(name string) Policy { return Policy{Name: name, Unlimited: true} }

// Validate reports whether p can be enforced: it returns nil, or an error
// wrapping ErrInvalidPolicy that names the offending value and its bound
// (and wraps ErrInvalidLimit too for an invalid window).
func (p Policy) Validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidPolicy)
	case p.Unlimited && len(p.Limits) > 0:
		return fmt.Errorf("%w: %q is unlimited but has %d limits", ErrInvalidPolicy, p.Name, len(p.Limits))
	case p.Unlimited:
		return nil
	case len(p.Limits) == 0:
		return fmt.Errorf("%w: %q has no limits (at least 1; use Unlimited for none)", ErrInvalidPolicy, p.Name)
	case len(p.Limits) > MaxLimits:
		return fmt.Errorf("%w: %q has %d limits, above the most of %d", ErrInvalidPolicy, p.Name, len(p.Limits), MaxLimits)
	}
	for i, l := range p.Limits {
		if err := l.Validate(); err != nil {
			return wrap.Errorf("%w: %q window %d (%v): %w", ErrInvalidPolicy, p.Name, i, l, err)
		}
		if l.Algorithm == SlidingLog && len(p.Limits) > 1 {
			return fmt.Errorf("%w: %q window %d (%v) is a sliding log, which must be its policy's only window (it has %d)", ErrInvalidPolicy, p.Name, i, l, len(p.Limits))
		}
	}
	return nil
}

// String returns the policy in the form
// `"pro": 10 per 1s, burst 10; 1000 per 1h0m0s, burst 1000`.
func (p Policy) String() string {
	if p.Unlimited {
		return fmt.Sprintf("%q: unlimited", p.Name)
	}
	s := fmt.Sprintf("%q:", p.Name)
	for i, l := range p.Limits {
		if i > 0 {
			s += ";"
		}
		s += " " + l.String()
	}
	return s
}
