// Package eventmetrics is what keyrate's metrics exporters (the
// keyrateprom and keyrateotel modules) share, so that they count alike and
// differ only in how they export: the counts of one policy's events
// (Counts), the bounded set of policy label values (Policies), the kinds
// of error (ErrorKind), and the evictions and refusals counted across the
// stores a Metrics watches (Watch).
//
// A policy name reaches an Observer from the request path, and a store's
// WithPolicyFunc can take it from a client's key: any bytes, of any length,
// as many names as the client likes. Policies keeps at most MaxPolicies
// label values, of which names the store lacks take at most
// MaxUnknownPolicies, counts any further name as Other, and turns a name
// into a label value that is valid UTF-8 and at most MaxPolicyLabel bytes.
package eventmetrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
)

// MaxPolicies is the most policy label values a Policies keeps; events for
// any further policy name are counted under the label value Other.
const MaxPolicies = 64

// MaxUnknownPolicies is the most of the MaxPolicies policy label values
// that names a store lacks (events with keyrate.ErrUnknownPolicy) may
// take; any further such name is counted under Other. Such a name can be
// a client's choice (a store's WithPolicyFunc that reads the client's
// key), and must not crowd out the policies the store has.
const MaxUnknownPolicies = MaxPolicies / 2

// MaxPolicyLabel is the longest policy label value, in bytes: a longer
// name is labelled with its first bytes and "...".
const MaxPolicyLabel = 128

// Other is the policy label of events past MaxPolicies distinct names.
const Other = "other"

// Policies maps policy names to an exporter's instruments for one policy
// label value (a *T), made by the function given to New when the label
// is first seen. It is safe for concurrent use.
type Policies[T any] struct {
	m       *xsync.MapOf[string, *T]
	newFunc func(label string) *T
	mu      sync.Mutex // serialises adding a label
	n       int        // labels added other than Other, under mu
}

// New returns a Policies whose *T for a label value is newFunc(label).
func New[T any](newFunc func(label string) *T) *Policies[T] {
	return &Policies[T]{m: xsync.NewMapOf[string, *T](), newFunc: newFunc}
}

// Get returns the *T of policy's label value, making it on first sight,
// and Other's once MaxPolicies names have been seen, or
// MaxUnknownPolicies for a name the store lacks (err is
// keyrate.ErrUnknownPolicy). Once a name's *T is made, Get is one lookup
// in a concurrent map and allocates nothing. A name whose label differs
// from it (not UTF-8, or longer than MaxPolicyLabel) is a client's, not a
// store's: it is stored under its label, so that the map holds no long
// name, and each of its events takes a lock and relabels it.
func (p *Policies[T]) Get(policy string, err error) *T {
	if c, ok := p.m.Load(policy); ok {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.m.Load(policy); ok {
		return c
	}
	key, label := policy, Label(policy)
	if label != policy {
		if c, ok := p.m.Load(label); ok {
			return c
		}
		key = label
	}
	most := MaxPolicies
	if errors.Is(err, keyrate.ErrUnknownPolicy) {
		most = MaxUnknownPolicies
	}
	if p.n >= most {
		if c, ok := p.m.Load(Other); ok {
			return c
		}
		key, label = Other, Other
	}
	c := p.newFunc(label)
	p.m.Store(key, c)
	if key != Other {
		p.n++
	}
	return c
}

// Range calls f with each *T made so far, once each, in no set order.
// It may run concurrently with Get, and then sees the *T made before it
// began, and perhaps some made since.
func (p *Policies[T]) Range(f func(*T)) {
	p.m.Range(func(_ string, c *T) bool {
		f(c)
		return true
	})
}

// Label returns the label value of the policy name policy: policy, with
// each byte sequence that is not UTF-8 replaced by U+FFFD (Prometheus
// refuses such a label value, and OTLP such an attribute), cut to its
// first MaxPolicyLabel bytes, "..." included, if longer.
func Label(policy string) string {
	if !utf8.ValidString(policy) {
		policy = strings.ToValidUTF8(policy, "\uFFFD")
	}
	if len(policy) > MaxPolicyLabel {
		n := MaxPolicyLabel - len("...")
		for n > 0 && !utf8.RuneStart(policy[n]) {
			n--
		}
		policy = policy[:n] + "..." // a copy: the label holds no long name
	}
	return policy
}

// ErrorKind is the kind of error an event carries, the value of an
// exporter's error label.
type ErrorKind int

// The kinds of error, in the order of ErrorKinds.
const (
	StoreFull     ErrorKind = iota // keyrate.ErrStoreFull
	UnknownPolicy                  // keyrate.ErrUnknownPolicy
	InvalidCost                    // keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst
	InvalidKey                     // keyrate.ErrInvalidKey
	Canceled                       // context.Canceled, context.DeadlineExceeded
	Unsupported                    // keyrate.ErrUnsupportedAlgorithm
	Backend                        // anything else: a Redis error
	NumErrorKinds
)

var errorKindNames = [NumErrorKinds]string{"store_full", "unknown_policy", "invalid_cost", "invalid_key", "canceled", "unsupported", "backend"}

// String returns the kind's label value, such as "store_full".
func (k ErrorKind) String() string {
	if k < 0 || k >= NumErrorKinds {
		return "backend"
	}
	return errorKindNames[k]
}

// KindOf returns the kind of the non-nil error err.
func KindOf(err error) ErrorKind {
	switch {
	case errors.Is(err, keyrate.ErrStoreFull):
		return StoreFull
	case errors.Is(err, keyrate.ErrUnknownPolicy):
		return UnknownPolicy
	case errors.Is(err, keyrate.ErrInvalidCost), errors.Is(err, keyrate.ErrCostExceedsBurst):
		return InvalidCost
	case errors.Is(err, keyrate.ErrInvalidKey):
		return InvalidKey
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	case errors.Is(err, keyrate.ErrUnsupportedAlgorithm):
		return Unsupported
	default:
		return Backend
	}
}
