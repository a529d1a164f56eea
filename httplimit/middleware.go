package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/isnil"
)

// New returns middleware that rate-limits requests with limiter: each
// request is keyed (ByIP by default), costed (1 by default) and decided by
// one call to limiter.AllowN. An allowed request goes on to the wrapped
// handler with the RateLimit-Policy and RateLimit header fields set; a
// denied one goes to the denied handler (429 Too Many Requests by default)
// with those fields and Retry-After set. See the package documentation for
// the header values and for the handling of errors, none of which lets a
// request through.
//
// The middleware is safe for concurrent use and may wrap any number of
// handlers, which then share the limiter's buckets. A nil handler is
// wrapped as http.DefaultServeMux, as http.Server treats it. For a known key
// and the default options, it adds two allocations per request (the two
// header values) to what the limiter itself costs.
//
// New returns an error wrapping keyrate.ErrInvalidOption if limiter is nil,
// or holds a nil pointer (or other nil value) of a limiter type, such as
// (*atomicbucket.Store)(nil), whose methods would panic on every request;
// or if an option is invalid.
func New(limiter keyrate.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	if limiter == nil {
		return nil, fmt.Errorf("%w: httplimit.New: the limiter is nil", keyrate.ErrInvalidOption)
	}
	if isnil.Is(limiter) {
		return nil, fmt.Errorf("%w: httplimit.New: the limiter is a nil %T", keyrate.ErrInvalidOption, limiter)
	}
	c := config{
		key:          (&ipKey{header: "X-Forwarded-For", v6bits: DefaultIPv6Prefix}).key,
		denied:       DefaultDenied,
		onError:      DefaultError,
		onStoreError: DefaultStoreError,
		policyName:   "default",
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	m := &middleware{limiter: limiter, config: c, policy: new(atomic.Pointer[policyFields])}
	return func(next http.Handler) http.Handler {
		if next == nil {
			next = http.DefaultServeMux
		}
		h := *m
		h.next = next
		return &h
	}, nil
}

// middleware is the http.Handler that New's function returns.
type middleware struct {
	limiter keyrate.Limiter
	config
	// policy caches the fields that depend only on the Limit, shared by
	// every handler one New call wraps.
	policy *atomic.Pointer[policyFields]
	next   http.Handler
}

// ServeHTTP decides r and either serves it with the wrapped handler or
// answers it with the denied or an error handler.
func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, err := m.key(r)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
	}
	if err != nil {
		m.onError(w, r, err)
		return
	}
	cost := 1
	if m.cost != nil {
		cost = m.cost(r)
	}
	d, err := m.limiter.AllowN(key, cost)
	if err != nil {
		if errors.Is(err, keyrate.ErrInvalidCost) || errors.Is(err, keyrate.ErrCostExceedsBurst) || errors.Is(err, keyrate.ErrInvalidKey) {
			m.onError(w, r, err)
		} else {
			m.onStoreError(w, r, err)
		}
		return
	}
	m.setHeaders(w.Header(), d)
	if !d.Allowed {
		m.denied(w, r, d)
		return
	}
	m.next.ServeHTTP(w, r)
}

// policyFor returns the fields for limit, from the cache when the limit is
// the one last seen.
func (m *middleware) policyFor(limit keyrate.Limit) *policyFields {
	if p := m.policy.Load(); p != nil && p.limit == limit {
		return p
	}
	p := newPolicyFields(m.policyName, limit)
	m.policy.Store(p)
	return p
}
