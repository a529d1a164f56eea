package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/clientkey"
)

// KeysFunc gives the keys a request is limited on, all or nothing (see
// ByKeys): it appends them to keys, which is empty with room for
// keyrate.MaxKeys, and returns the result. Each key names its tier (from
// the limiter's Tier) and its cost; a zero Cost is the request's cost
// (WithCost's, 1 by default). An error, or no keys, is handled as a key
// function's (see ByFunc).
type KeysFunc func(r *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error)

// ByKeys limits each request on several keys at once, each under its own
// tier, all or nothing (keyrate.AllowAll): a user and its organisation,
// say. The request goes through only if every key holds its cost, and a
// request one key denies is charged to none. A limiter with its own
// AllowAllContext (redisbucket.Store: one script call) decides with it.
// The headers and the denied handler get the decision of the key that
// denied the request, or, when it is allowed, of the key nearest to
// denying; the observer (WithObserver) is told that key, under its
// policy, so metrics say which key denies. The response does not name
// it.
//
// Given ByKeys, the middleware leaves the key and tier options (ByIP,
// ByHeader, ByFunc, WithTier, ...) unused. It needs a
// keyrate.PolicyLimiter, and New refuses it beside WithRefunds or
// WithInflight (cap requests in flight with a middleware of its own,
// New(nil, WithInflight(l)), around this one). A key list AllowAll
// rejects (more than keyrate.MaxKeys keys, a key twice) goes to the error
// handler. A nil f is an error from New.
func ByKeys(f KeysFunc) Option {
	return func(c *config) {
		if f == nil {
			c.fail(fmt.Errorf("%w: httplimit.ByKeys: a nil function", keyrate.ErrInvalidOption))
			return
		}
		c.keys, c.keysOption = f, "ByKeys"
	}
}

// multiLimiter is a limiter that decides several keys its own way.
type multiLimiter interface {
	AllowAllContext(ctx context.Context, keys []keyrate.KeyCost) (keyrate.MultiDecision, error)
}

// keyBufs holds ByKeys's key buffers, so that a request allocates none.
var keyBufs = sync.Pool{New: func() any { return new([keyrate.MaxKeys]keyrate.KeyCost) }}

// serveKeys is ServeHTTP under ByKeys.
func (m *middleware) serveKeys(w http.ResponseWriter, r *http.Request) {
	buf := keyBufs.Get().(*[keyrate.MaxKeys]keyrate.KeyCost)
	defer func() {
		*buf = [keyrate.MaxKeys]keyrate.KeyCost{} // drop the keys' strings
		keyBufs.Put(buf)
	}()
	keys, err := m.keys(r, buf[:0])
	if err == nil && len(keys) == 0 {
		err = fmt.Errorf("%w: the keys function returned no key", ErrNoKey)
	}
	if err != nil {
		if m.observer != nil {
			m.observe("", nil, 0, "", false, clientkey.Failed(err))
		}
		switch {
		case m.shadow:
			m.shadowPass(r, keyrate.Decision{}, err)
			m.next.ServeHTTP(w, r)
		case errors.Is(err, ErrNoKey):
			m.onNoKey(w, r, err)
		default:
			m.onError(w, r, err)
		}
		return
	}
	cost := 1
	if m.cost != nil {
		cost = m.cost(r)
	}
	for i := range keys {
		if keys[i].Cost == 0 {
			keys[i].Cost = cost
		}
	}
	var d keyrate.MultiDecision
	if ml, ok := m.limiter.(multiLimiter); ok {
		d, err = ml.AllowAllContext(r.Context(), keys)
	} else {
		d, err = keyrate.AllowAll(m.policies, keys)
	}
	if m.observer != nil {
		k := keyrate.KeyCost{}
		if d.Index >= 0 && d.Index < len(keys) {
			k = keys[d.Index]
		}
		m.observe(k.Key, m.tierSlot(k.Tier.Name()), k.Cost, d.Policy, d.Allowed, err)
	}
	if err != nil {
		switch {
		case m.shadow:
			m.shadowPass(r, keyrate.Decision{}, err)
			m.next.ServeHTTP(w, r)
		case errors.Is(err, keyrate.ErrInvalidCost) || errors.Is(err, keyrate.ErrCostExceedsBurst) ||
			errors.Is(err, keyrate.ErrInvalidKey) || errors.Is(err, keyrate.ErrUnknownPolicy) ||
			errors.Is(err, keyrate.ErrInvalidKeys):
			m.onError(w, r, err)
		default:
			m.onStoreError(w, r, err)
		}
		return
	}
	m.setHeaders(w.Header(), &d.Decision, m.tierSlot(d.Policy))
	if !d.Allowed {
		if !m.shadow {
			m.denied(w, r, d.Decision)
			return
		}
		m.shadowPass(r, d.Decision, nil)
	}
	m.next.ServeHTTP(w, r)
}
