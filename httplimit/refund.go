package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/keyrate/keyrate"
)

// ErrNotRefundable reports a Refund for a request that no middleware with
// WithRefunds admitted: nothing says which bucket to give tokens back to.
var ErrNotRefundable = errors.New("httplimit: request was not admitted by a middleware with WithRefunds")

// WithRefunds lets the handlers behind the middleware give back tokens an
// admitted request spent, with Refund: when the upstream failed, say, or
// the request turned out cheaper than its cost. It needs a
// keyrate.PolicyLimiter (New returns an error wrapping
// keyrate.ErrInvalidOption for a limiter that is not one). The default is
// off: it costs three allocations per admitted request (the refund's
// record, a context and the request's shallow copy that carries it), and
// nothing when it is off.
func WithRefunds() Option {
	return func(c *config) { c.refundOption = "WithRefunds" }
}

// refundKey is the context key of a request's refund record.
type refundKey struct{}

// refund is what Refund needs to give tokens back for one admitted
// request: the bucket, the policy it was decided under, and how many of
// the tokens it spent have not been given back yet.
type refund struct {
	limiter    keyrate.PolicyLimiter
	ctxLimiter contextPolicies // limiter, if it takes a context; or nil
	key        string
	slot       *policySlot // nil: decided by AllowN
	unlimited  bool        // decided under an unlimited policy: nothing was spent
	left       atomic.Int64
}

// withRefund returns r carrying the refund record for its decision.
func withRefund(r *http.Request, l keyrate.PolicyLimiter, lc contextPolicies, key string, slot *policySlot, cost int, unlimited bool) *http.Request {
	rf := &refund{limiter: l, ctxLimiter: lc, key: key, slot: slot, unlimited: unlimited}
	rf.left.Store(int64(cost))
	return r.WithContext(context.WithValue(r.Context(), refundKey{}, rf))
}

// Refund gives cost tokens back to the bucket that the middleware (with
// WithRefunds) spent them from to admit r: the same key under the same
// policy, with the limiter's RefundTier (or Refund, for a request decided
// without a tier). Call it from the handler, with the request it was
// given (or one derived from it), at most up to the request's cost in
// all: a refund made before the bucket refilled leaves the key as if
// those tokens had not been spent. Refunds may be made from several
// goroutines. Under an unlimited policy nothing was spent and Refund
// returns nil.
//
// It returns an error wrapping ErrNotRefundable for a request the
// middleware did not admit with WithRefunds (a nil r included),
// keyrate.ErrInvalidCost for a cost below 1 or above what the request
// spent and has not had back (and then refunds nothing), or the limiter's
// error.
func Refund(r *http.Request, cost int) error {
	if r == nil {
		return ErrNotRefundable
	}
	rf, _ := r.Context().Value(refundKey{}).(*refund)
	if rf == nil {
		return ErrNotRefundable
	}
	if cost < 1 {
		return fmt.Errorf("%w: httplimit.Refund: cost %d is below 1", keyrate.ErrInvalidCost, cost)
	}
	if rf.unlimited {
		return nil
	}
	for {
		left := rf.left.Load()
		if int64(cost) > left {
			return fmt.Errorf("%w: httplimit.Refund: cost %d is above the %d tokens the request spent and has not had back", keyrate.ErrInvalidCost, cost, left)
		}
		if rf.left.CompareAndSwap(left, left-int64(cost)) {
			break
		}
	}
	var err error
	switch {
	case rf.slot != nil && rf.ctxLimiter != nil:
		err = rf.ctxLimiter.RefundTierContext(r.Context(), rf.key, rf.slot.tier, cost)
	case rf.slot != nil:
		err = rf.limiter.RefundTier(rf.key, rf.slot.tier, cost)
	case rf.ctxLimiter != nil:
		err = rf.ctxLimiter.RefundContext(r.Context(), rf.key, cost)
	default:
		err = rf.limiter.Refund(rf.key, cost)
	}
	if err != nil {
		rf.left.Add(int64(cost))
	}
	return err
}
