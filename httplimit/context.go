package httplimit

import (
	"context"

	"github.com/keyrate/keyrate"
)

// The middleware passes each request's context to a limiter that takes
// one (redisbucket.Store does), so that a store call does not outlive the
// request it decides: a client that goes away, or a server shutting down,
// cancels the call. The in-process stores take none, and need none: their
// calls do not block.

// contextLimiter is a limiter whose AllowN can take a context.
type contextLimiter interface {
	AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error)
}

// contextPolicies is a policy limiter whose AllowTier and refunds can take
// a context.
type contextPolicies interface {
	AllowTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error)
	RefundContext(ctx context.Context, key string, cost int) error
	RefundTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) error
}
