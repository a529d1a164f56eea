package httplimit

import (
	"fmt"
	"net/http"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
)

// Option configures the middleware that New builds. Options apply in order;
// of the key options (ByIP, ByHeader, ByFunc) the last one wins.
type Option func(*config)

// DeniedFunc writes the response to a request the limiter denied. When it is
// called, the rate-limit headers and Retry-After are already set on w; it
// must write the status (429 is conventional) and may write a body. d is the
// limiter's decision.
type DeniedFunc func(w http.ResponseWriter, r *http.Request, d keyrate.Decision)

// ErrorFunc writes the response to a request that could not be decided; err
// says why. No rate-limit headers are set when it is called.
type ErrorFunc func(w http.ResponseWriter, r *http.Request, err error)

// config is what the options resolve to.
type config struct {
	key          func(*http.Request) (string, error)
	cost         func(*http.Request) int
	denied       DeniedFunc
	onError      ErrorFunc
	onNoKey      ErrorFunc
	onStoreError ErrorFunc
	policyName   string
	legacy       bool
	// tier names each request's policy; tierOption names the option that
	// set it, for New's error when the limiter has no policies.
	tier       func(*http.Request) string
	tierOption string
	// refundOption is "WithRefunds" if refunds are on.
	refundOption string
	// shadow is set by WithShadow, onShadow its report function.
	shadow   bool
	onShadow ShadowFunc
	// observer is WithObserver's, nil for none.
	observer keyrate.Observer
	// keys is ByKeys's function (multikey.go), keysOption "ByKeys" if set.
	keys       KeysFunc
	keysOption string
	// inflight is WithInflight's limit, nil for none; inflightDenied
	// answers the requests it refuses.
	inflight       inflight.Limiter
	inflightDenied InflightDeniedFunc
	err            error // the first option that did not apply
}

// fail records the first option error.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithCost sets the function that gives each request's cost in tokens. The
// default is 1 for every request. A cost the limiter rejects (below 1, or
// above the Limit's Burst) is a server misconfiguration: the request goes to
// the error handler, never through. A nil cost keeps the default.
func WithCost(cost func(*http.Request) int) Option {
	return func(c *config) {
		c.cost = cost
	}
}

// WithDeniedHandler sets the function that answers a denied request. The
// default, DefaultDenied, writes 429 Too Many Requests with a short
// plain-text body. A nil f keeps the default.
func WithDeniedHandler(f DeniedFunc) Option {
	return func(c *config) {
		if f != nil {
			c.denied = f
		}
	}
}

// WithErrorHandler sets the function that answers a request whose key or
// cost could not be used: the key function failed, or the limiter rejected
// the cost or the key. These are server-side faults. The default,
// DefaultError, writes 500 Internal Server Error without revealing err to
// the client. A nil f keeps the default. A request that carries no key
// goes to WithNoKeyHandler's function instead.
func WithErrorHandler(f ErrorFunc) Option {
	return func(c *config) {
		if f != nil {
			c.onError = f
		}
	}
}

// WithNoKeyHandler sets the function that answers a request in which the
// key function found no key (an error wrapping ErrNoKey: a ByHeader header
// missing or empty, or an empty key from ByFunc): the client's omission,
// not a server fault. The default, DefaultNoKey, writes 400 Bad Request.
// The request never goes through. A nil f keeps the default.
func WithNoKeyHandler(f ErrorFunc) Option {
	return func(c *config) {
		if f != nil {
			c.onNoKey = f
		}
	}
}

// WithStoreErrorHandler sets the function that answers a request when the
// limiter itself fails (any error other than those WithErrorHandler covers,
// such as a remote store's outage). The default, DefaultStoreError, writes
// 503 Service Unavailable with Retry-After: 1. A nil f keeps the default.
func WithStoreErrorHandler(f ErrorFunc) Option {
	return func(c *config) {
		if f != nil {
			c.onStoreError = f
		}
	}
}

// WithPolicyName sets the name by which the RateLimit-Policy and RateLimit
// fields identify the limiter's default policy (keyrate.DefaultPolicy),
// and every policy of a limiter that is not a keyrate.PolicyLimiter. The
// default is "default". Other policies of a PolicyLimiter are identified
// by their own names. The name must be 1 to 64 printable ASCII characters
// other than '"' and '\', so that it is a structured-field String that
// needs no escaping; New reports any other name as an error wrapping
// keyrate.ErrInvalidOption.
func WithPolicyName(name string) Option {
	return func(c *config) {
		if len(name) < 1 || len(name) > 64 {
			c.fail(fmt.Errorf("%w: httplimit.WithPolicyName(%q): length %d is not in [1, 64]", keyrate.ErrInvalidOption, name, len(name)))
			return
		}
		for i := 0; i < len(name); i++ {
			if b := name[i]; b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
				c.fail(fmt.Errorf("%w: httplimit.WithPolicyName(%q): byte %#x at %d is not allowed", keyrate.ErrInvalidOption, name, b, i))
				return
			}
		}
		c.policyName = name
	}
}

// WithLegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset to every decided response, for clients that predate the
// RateLimit fields. X-RateLimit-Reset is in delay-seconds. The default is
// off.
func WithLegacyHeaders() Option {
	return func(c *config) { c.legacy = true }
}

// DefaultDenied is the default DeniedFunc: 429 Too Many Requests with the
// body "Too Many Requests" as text/plain.
func DefaultDenied(w http.ResponseWriter, _ *http.Request, _ keyrate.Decision) {
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}

// DefaultError is the default handler for key and cost errors: 500 Internal
// Server Error with a plain-text body that does not include err.
func DefaultError(w http.ResponseWriter, _ *http.Request, _ error) {
	http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
}

// DefaultNoKey is the default handler for a request that carries no key:
// 400 Bad Request with a plain-text body naming what was missing (the
// message of err, which names the header for ByHeader).
func DefaultNoKey(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, http.StatusText(http.StatusBadRequest)+": "+err.Error(), http.StatusBadRequest)
}

// DefaultStoreError is the default handler for limiter failures: 503
// Service Unavailable with Retry-After: 1 and a plain-text body that does
// not include err.
func DefaultStoreError(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
}
