package httplimit

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keyrate/keyrate"
)

// WithTier makes the middleware decide each request under the policy
// (tier) that tier names for it, with the limiter's AllowTier: typically
// the client's plan, known once it is authenticated. The limiter must be
// a keyrate.PolicyLimiter that has the policies (see keyrate.WithPolicies
// and the store's SetPolicy); New returns an error wrapping
// keyrate.ErrInvalidOption for a limiter that is not one, and for a nil
// tier.
//
// A request for which tier returns "" is decided by AllowN, as without
// this option: under the policy the store's keyrate.WithPolicyFunc names
// for the key, or its default policy. So is a request whose tier the
// limiter does not have: it falls back to what a request naming no tier
// gets, which a client could always have by naming none, so a wrong or
// made-up name never admits more, and it is never an error (nor a log
// line a client could flood). Check the names where they are made if a
// wrong one must be noticed. The key is the same whatever the tier: a
// key's bucket carries over from one policy to the next as
// keyrate.PolicyLimiter describes.
//
// tier is called once per request, on the request's goroutine. Looking
// its name up costs one atomic load and one map read, and allocates
// nothing, for a name the limiter has; a name it lacks asks the limiter
// each time. Of the tier options (WithTier, TierByHeader, TierByContext)
// the last one wins.
func WithTier(tier func(*http.Request) string) Option {
	return func(c *config) {
		if tier == nil {
			c.fail(fmt.Errorf("%w: httplimit.WithTier(nil)", keyrate.ErrInvalidOption))
			return
		}
		c.tier, c.tierOption = tier, "WithTier"
	}
}

// TierByHeader is WithTier with the value of the request header name, such
// as "X-Plan": the first value, or "" for a request without the header.
// Only a header the client cannot choose should name a tier: one set by
// a gateway that authenticates the client and removes the client's own.
// A name that is not a valid header field name makes New fail with an
// error wrapping keyrate.ErrInvalidOption.
func TierByHeader(name string) Option {
	return func(c *config) {
		if !validFieldName(name) {
			c.fail(fmt.Errorf("%w: httplimit.TierByHeader(%q): not a valid header field name", keyrate.ErrInvalidOption, name))
			return
		}
		canon := http.CanonicalHeaderKey(name)
		c.tier = func(r *http.Request) string {
			if v := r.Header[canon]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		c.tierOption = "TierByHeader"
	}
}

// TierByContext is WithTier with the tier that authentication middleware
// stored in the request's context with ContextWithTier: put that
// middleware in front of this one. A request whose context holds no tier
// is decided as one naming none (see WithTier).
func TierByContext() Option {
	return func(c *config) {
		c.tier = func(r *http.Request) string { return TierFromContext(r.Context()) }
		c.tierOption = "TierByContext"
	}
}

// tierKey is the context key of the tier ContextWithTier stores.
type tierKey struct{}

// ContextWithTier returns a copy of ctx that carries the tier name, for
// TierByContext: authentication middleware that knows the client's plan
// calls it and serves the next handler with r.WithContext. It needs
// nothing from this package but this function.
//
//	func auth(next http.Handler) http.Handler {
//		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			plan := lookUpPlan(r) // e.g. "pro"
//			next.ServeHTTP(w, r.WithContext(httplimit.ContextWithTier(r.Context(), plan)))
//		})
//	}
func ContextWithTier(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, tierKey{}, name)
}

// TierFromContext returns the tier name ContextWithTier stored in ctx, or
// "" if there is none.
func TierFromContext(ctx context.Context) string {
	name, _ := ctx.Value(tierKey{}).(string)
	return name
}
