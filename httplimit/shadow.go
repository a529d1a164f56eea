package httplimit

import (
	"net/http"

	"github.com/keyrate/keyrate"
)

// ShadowFunc reports a request that WithShadow let through although the
// middleware would have refused it: d is the limiter's decision for a
// denied request (d.Allowed is false) and err is nil; for a request that
// could not be decided (no key, a failing key function, a cost or key the
// limiter rejects, a store error), err says why and d is the zero
// Decision; for a request over WithInflight's cap, err wraps
// ErrTooManyInFlight and d is the zero Decision. It is called on the request's goroutine, before the wrapped
// handler.
type ShadowFunc func(r *http.Request, d keyrate.Decision, err error)

// WithShadow turns on shadow mode, to roll a new limit out safely: every
// request is decided as usual, and gets the RateLimit-Policy and
// RateLimit fields of its decision (and the legacy ones, with
// WithLegacyHeaders), but none is refused. A request the middleware would
// have refused goes on to the wrapped handler, and is reported to report,
// if it is not nil, to be counted or logged; the denied and error
// handlers are never called. A request that would have been denied gets
// the fields of its deny (r=0, and t the seconds until it would be
// allowed) but no Retry-After, since it was not refused. Allowed requests
// spend from their buckets as usual; a denied one spends nothing (and
// with WithRefunds has nothing to give back), so the buckets are what
// they would be without shadow mode. The default is off.
func WithShadow(report ShadowFunc) Option {
	return func(c *config) { c.shadow, c.onShadow = true, report }
}

// shadowPass reports r, which the middleware would have refused for d or
// err, to the shadow function, if any.
func (m *middleware) shadowPass(r *http.Request, d keyrate.Decision, err error) {
	if m.onShadow != nil {
		m.onShadow(r, d, err)
	}
}
