package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/isnil"
)

// ErrTooManyInFlight is the error a ShadowFunc is given for a request that
// WithInflight's limit would have refused: its key already had the limit's
// requests in flight.
var ErrTooManyInFlight = errors.New("httplimit: too many requests in flight")

// WithInflight caps the requests each key may have in flight at once with
// l (an *inflight.Store, or redisbucket's InflightStore for a fleet-wide
// cap), beside the rate limit or, with New's limiter nil, alone. A
// request takes a slot of its key before the rate limit decides it, and
// gives it back when the wrapped handler returns or panics, or at once if
// the rate limit refuses it (which then spends nothing on a request the
// cap refused, and holds no slot for one it denied). A request whose key
// is at its cap goes to WithInflightDeniedHandler's function (429 by
// default, with a body that says concurrency, not rate). Shadow mode lets
// it through, holding no slot, and reports ErrTooManyInFlight. An error
// from l goes where the rate limiter's would (an invalid key to the error
// handler, any other to the store-error handler). The observer is told of
// each decision with Event.Inflight set. A request whose context an
// earlier middleware marked with inflight.Critical may take the slots
// inflight.WithReserved keeps (priority shedding). The default is no cap; a nil or
// typed-nil l makes New fail with an error wrapping
// keyrate.ErrInvalidOption.
func WithInflight(l inflight.Limiter) Option {
	return func(c *config) {
		if l == nil || isnil.Is(l) {
			c.fail(fmt.Errorf("%w: httplimit.WithInflight: the limiter is nil", keyrate.ErrInvalidOption))
			return
		}
		c.inflight = l
	}
}

// InflightDeniedFunc writes the response to a request refused because its
// key has limit requests in flight already. It must write the status (429
// is conventional) and may write a body.
type InflightDeniedFunc func(w http.ResponseWriter, r *http.Request, limit int)

// WithInflightDeniedHandler sets the function that answers a request
// WithInflight's cap refused. The default is DefaultInflightDenied. A nil
// f keeps the default.
func WithInflightDeniedHandler(f InflightDeniedFunc) Option {
	return func(c *config) {
		if f != nil {
			c.inflightDenied = f
		}
	}
}

// DefaultInflightDenied is the default InflightDeniedFunc: 429 Too Many
// Requests with Retry-After: 1 and a plain-text body naming the cause,
// "Too Many Requests: too many requests in flight (limit N)". It sets no
// RateLimit fields: they describe a rate, which did not refuse.
func DefaultInflightDenied(w http.ResponseWriter, _ *http.Request, limit int) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, http.StatusText(http.StatusTooManyRequests)+": too many requests in flight (limit "+strconv.Itoa(limit)+")", http.StatusTooManyRequests)
}

// acquireSlot takes a slot of key from the in-flight limit. It reports
// false when it has answered the request (a refusal, an error) and the
// request must go no further; in shadow mode it answers nothing and
// returns the zero Slot and true.
func (m *middleware) acquireSlot(w http.ResponseWriter, r *http.Request, key string) (inflight.Slot, bool) {
	slot, err := m.inflight.TryAcquireContext(r.Context(), key)
	if m.observer != nil {
		m.observer.Observe(keyrate.Event{Key: key, Policy: keyrate.InflightPolicy, Cost: 1,
			Allowed: slot.Acquired(), Err: err, Shadow: m.shadow, Inflight: true})
	}
	if err == nil && slot.Acquired() {
		return slot, true
	}
	switch {
	case m.shadow:
		if err == nil {
			err = fmt.Errorf("%w: key %q has %d", ErrTooManyInFlight, key, m.inflight.Limit())
		}
		m.shadowPass(r, keyrate.Decision{}, err)
		return inflight.Slot{}, true
	case err == nil:
		m.inflightDenied(w, r, m.inflight.Limit())
	case errors.Is(err, keyrate.ErrInvalidKey):
		m.onError(w, r, err)
	default:
		m.onStoreError(w, r, err)
	}
	return inflight.Slot{}, false
}
