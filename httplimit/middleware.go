package httplimit

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/clientkey"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/isnil"
)

// New returns middleware that rate-limits requests with limiter: each
// request is keyed (ByIP by default), costed (1 by default) and decided by
// one call to limiter.AllowN, or to AllowTier when a tier option (WithTier,
// TierByHeader, TierByContext) names the request's policy. An allowed
// request goes on to the wrapped handler with the RateLimit-Policy and
// RateLimit header fields set; a denied one goes to the denied handler
// (429 Too Many Requests by default) with those fields and Retry-After
// set. See the package documentation for the header values and for the
// handling of errors, none of which lets a request through.
//
// The middleware is safe for concurrent use and may wrap any number of
// handlers, which then share the limiter's buckets. A nil handler is
// wrapped as http.DefaultServeMux, as http.Server treats it. For a known key
// it adds one allocation per request (the header values, with or without
// WithLegacyHeaders or WithShadow) to what the limiter itself costs; a tier
// option adds none for a tier the limiter has, and WithRefunds adds three.
//
// With WithInflight, requests are also capped in flight per key; limiter
// may then be nil, for the cap alone.
//
// New returns an error wrapping keyrate.ErrInvalidOption if limiter is nil
// without WithInflight, or holds a nil pointer (or other nil value) of a limiter type, such as
// (*atomicbucket.Store)(nil), whose methods would panic on every request;
// if a tier option or WithRefunds is given with a limiter that is not a
// keyrate.PolicyLimiter; or if an option is invalid.
func New(limiter keyrate.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	if limiter != nil && isnil.Is(limiter) {
		return nil, fmt.Errorf("%w: httplimit.New: the limiter is a nil %T", keyrate.ErrInvalidOption, limiter)
	}
	c := config{
		key:            (&ipKey{header: "X-Forwarded-For", v6bits: DefaultIPv6Prefix}).key,
		denied:         DefaultDenied,
		onError:        DefaultError,
		onNoKey:        DefaultNoKey,
		onStoreError:   DefaultStoreError,
		policyName:     keyrate.DefaultPolicy,
		inflightDenied: DefaultInflightDenied,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if limiter == nil && c.inflight == nil {
		return nil, fmt.Errorf("%w: httplimit.New: the limiter is nil, and no WithInflight cap is given", keyrate.ErrInvalidOption)
	}
	pl, _ := limiter.(keyrate.PolicyLimiter)
	if c.keysOption != "" && c.inflight != nil {
		return nil, fmt.Errorf("%w: httplimit.ByKeys does not take WithInflight (wrap the handler in New(nil, WithInflight(l)) as well)", keyrate.ErrInvalidOption)
	}
	if c.keysOption != "" && c.refundOption != "" {
		return nil, fmt.Errorf("%w: httplimit.ByKeys does not take WithRefunds", keyrate.ErrInvalidOption)
	}
	for _, need := range []string{c.tierOption, c.refundOption, c.keysOption} {
		if need != "" && pl == nil {
			return nil, fmt.Errorf("%w: httplimit.%s needs a keyrate.PolicyLimiter, and %T is not one", keyrate.ErrInvalidOption, need, limiter)
		}
	}
	s := &shared{def: &policySlot{name: keyrate.DefaultPolicy}}
	s.named.Store(&map[string]*policySlot{keyrate.DefaultPolicy: s.def})
	m := &middleware{limiter: limiter, policies: pl, config: c, shared: s}
	m.ctxLimiter, _ = limiter.(contextLimiter)
	if pl != nil {
		m.ctxPolicies, _ = limiter.(contextPolicies)
		m.versions, _ = limiter.(policyVersions)
	}
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
	// policies is limiter as a PolicyLimiter, or nil if it is not one.
	policies keyrate.PolicyLimiter
	// ctxLimiter and ctxPolicies are limiter as one that takes the
	// request's context, or nil.
	ctxLimiter  contextLimiter
	ctxPolicies contextPolicies
	// versions is limiter as a store that counts its policy changes, or
	// nil: the cached header fields are rebuilt when the count moves.
	versions policyVersions
	config
	*shared
	next http.Handler
}

// shared is the state that every handler one New call wraps shares: the
// policies the middleware has met, with their tiers and header fields.
type shared struct {
	// def is the default policy's slot; its tier is the zero Tier. A
	// plain Limiter's decisions all use it.
	def *policySlot
	// named maps a policy name to its slot, for every name the limiter
	// has that a request or a decision has named ("default" included).
	// Reads are one atomic load and a map read; additions, rare, copy
	// the map under mu. Only names the limiter has are added, so the map
	// is no larger than its set of policies, whatever clients send.
	named atomic.Pointer[map[string]*policySlot]
	mu    sync.Mutex
}

// policySlot is what the middleware keeps for one of the limiter's
// policies: its Tier, and the header fields for its current limits.
type policySlot struct {
	name   string
	tier   keyrate.Tier
	fields atomic.Pointer[policyFields]
}

// ServeHTTP decides r and either serves it with the wrapped handler or
// answers it with the denied or an error handler.
func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.keys != nil {
		m.serveKeys(w, r) // ByKeys (multikey.go)
		return
	}
	key, err := m.key(r)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
	}
	if err != nil {
		if m.observer != nil {
			m.observe(key, nil, 0, "", false, clientkey.Failed(err))
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
	if m.inflight != nil {
		slot, ok := m.acquireSlot(w, r, key)
		if !ok {
			return
		}
		defer slot.Release()
	}
	if m.limiter == nil {
		m.next.ServeHTTP(w, r) // a WithInflight cap alone: no rate to decide
		return
	}
	cost := 1
	if m.cost != nil {
		cost = m.cost(r)
	}
	var (
		d    keyrate.Decision
		slot *policySlot
	)
	if m.tier != nil {
		slot = m.tierSlot(m.tier(r))
	}
	switch {
	case slot != nil && m.ctxPolicies != nil:
		d, err = m.ctxPolicies.AllowTierContext(r.Context(), key, slot.tier, cost)
	case slot != nil:
		d, err = m.policies.AllowTier(key, slot.tier, cost)
	case m.ctxLimiter != nil:
		d, err = m.ctxLimiter.AllowNContext(r.Context(), key, cost)
	default:
		d, err = m.limiter.AllowN(key, cost)
	}
	if m.observer != nil {
		m.observe(key, slot, cost, d.Policy, d.Allowed, err)
	}
	if err != nil {
		switch {
		case m.shadow:
			m.shadowPass(r, keyrate.Decision{}, err)
			m.next.ServeHTTP(w, r)
		case errors.Is(err, keyrate.ErrInvalidCost) || errors.Is(err, keyrate.ErrCostExceedsBurst) ||
			errors.Is(err, keyrate.ErrInvalidKey) || errors.Is(err, keyrate.ErrUnknownPolicy):
			m.onError(w, r, err)
		default:
			m.onStoreError(w, r, err)
		}
		return
	}
	m.setHeaders(w.Header(), &d, slot)
	if !d.Allowed {
		if !m.shadow {
			m.denied(w, r, d)
			return
		}
		m.shadowPass(r, d, nil)
		cost = 0 // a deny spent nothing: nothing to refund
	}
	if m.refundOption != "" {
		r = withRefund(r, m.policies, m.ctxPolicies, key, slot, cost, d.Limit == (keyrate.Limit{}))
	}
	m.next.ServeHTTP(w, r)
}

// tierSlot returns the slot of the policy named name, or nil for the
// empty name and for a name the limiter does not have: the request is
// then decided by AllowN, as without a tier option.
func (m *middleware) tierSlot(name string) *policySlot {
	if name == "" {
		return nil
	}
	if s := (*m.named.Load())[name]; s != nil {
		return s
	}
	return m.addSlot(name)
}

// addSlot returns the slot for the policy named name, adding it if the
// limiter has such a policy; it returns nil if it does not, adding
// nothing.
func (m *middleware) addSlot(name string) *policySlot {
	tier, err := m.policies.Tier(name)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	named := *m.named.Load()
	if s := named[name]; s != nil {
		return s
	}
	s := &policySlot{name: name, tier: tier}
	next := maps.Clone(named)
	next[name] = s
	m.named.Store(&next)
	return s
}

// fieldsFor returns the header fields for d, whose window is w, from the
// cache when they match it. slot is the policy the request named, or nil.
func (m *middleware) fieldsFor(d *keyrate.Decision, w int, slot *policySlot) *policyFields {
	switch {
	case slot != nil && slot.name == d.Policy:
	case m.policies == nil || d.Policy == "" || d.Policy == keyrate.DefaultPolicy:
		slot = m.def
	default:
		// A policy the limiter chose by itself (WithPolicyFunc).
		if slot = (*m.named.Load())[d.Policy]; slot == nil {
			slot = m.addSlot(d.Policy)
		}
	}
	ver := m.policyVersion() // before the policies are listed: see rules.Policies.Version
	if slot != nil {
		if p := slot.fields.Load(); p != nil && p.matches(d, w) && p.ver == ver {
			return p
		}
	}
	p, ok := m.buildFields(d, w)
	p.ver = ver
	if slot != nil && ok {
		slot.fields.Store(p)
	}
	return p
}

// policyVersions is a store that counts its policy changes (the
// in-process stores and redisbucket): its PolicyVersion's parameter type
// is internal, so that the method is plumbing rather than API.
type policyVersions interface {
	PolicyVersion(handle.PolicyVersion) uint64
}

// policyVersion returns the limiter's count of policy changes, or 0 for a
// limiter that does not count them (its fields are rebuilt only when a
// decision's window no longer matches them).
func (m *middleware) policyVersion() uint64 {
	if m.versions == nil {
		return 0
	}
	return m.versions.PolicyVersion(handle.PolicyVersion{})
}

// buildFields builds the header fields for the policy of d, whose window
// is w: every window of the policy as the limiter lists it now. It reports
// whether the fields may be cached: not if the policy changed again since
// d was made (the listed window w is not d's Limit), for then they are a
// mix of two versions; the fields then describe window w alone, as they
// do for a plain Limiter or a policy the limiter does not list.
func (m *middleware) buildFields(d *keyrate.Decision, w int) (*policyFields, bool) {
	name := d.Policy
	if name == "" || name == keyrate.DefaultPolicy || m.policies == nil {
		name = m.policyName
	}
	if m.policies != nil {
		want := d.Policy
		if want == "" {
			want = keyrate.DefaultPolicy
		}
		for _, p := range m.policies.Policies() {
			if p.Name != want {
				continue
			}
			if w < len(p.Limits) && p.Limits[w] == d.Limit {
				return newPolicyFields(name, d.Policy, slices.Clone(p.Limits)), true
			}
			limits := make([]keyrate.Limit, max(w+1, len(p.Limits)))
			limits[w] = d.Limit
			return newPolicyFields(name, d.Policy, limits), false
		}
	}
	limits := make([]keyrate.Limit, w+1)
	limits[w] = d.Limit
	return newPolicyFields(name, d.Policy, limits), true
}
