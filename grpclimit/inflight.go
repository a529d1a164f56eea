package grpclimit

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/isnil"
)

// ErrTooManyInFlight is the error a ShadowFunc is given for a call that
// WithInflight's cap would have refused: its key already had the cap's
// calls in flight.
var ErrTooManyInFlight = errors.New("grpclimit: too many calls in flight")

// WithInflight caps the calls each key may have in flight at once with l
// (an *inflight.Store, or redisbucket's InflightStore for a fleet-wide
// cap), beside the rate limit or, with New's limiter nil, alone. A call,
// or a stream, takes a slot of its key before the rate limit decides it,
// and gives it back when the handler returns (for a stream: when its
// handler returns, which a cancelled stream's does) or panics, or at once
// if the rate limit refuses it. A call over the cap ends with
// codes.ResourceExhausted and a message saying "too many calls in flight"
// (no RetryInfo: no time is known at which a slot frees). Shadow mode lets
// it through, holding no slot, and reports an error wrapping
// ErrTooManyInFlight. An error from l ends the call as a rate limiter's
// would (codes.Internal for an invalid key, codes.Unavailable for any
// other). The observer is told of each of the cap's decisions with
// keyrate.Event.Inflight set and the policy keyrate.InflightPolicy. A
// call whose context an earlier interceptor marked with inflight.Critical
// may take the slots inflight.WithReserved keeps (priority shedding). The
// default is no cap; a nil or typed-nil l makes New fail with an error
// wrapping keyrate.ErrInvalidOption.
func WithInflight(l inflight.Limiter) Option {
	return func(c *config) {
		if l == nil || isnil.Is(l) {
			c.fail(fmt.Errorf("%w: grpclimit.WithInflight: the limiter is nil", keyrate.ErrInvalidOption))
			return
		}
		c.inflight = l
	}
}

// acquireSlot takes a slot of key for a call to method. It returns the
// status error the call ends with if it must end; in shadow mode it
// reports the refusal and returns the zero Slot and nil.
func (in *Interceptor) acquireSlot(ctx context.Context, method, key string) (inflight.Slot, error) {
	slot, err := in.inflight.TryAcquireContext(ctx, key)
	if in.observer != nil {
		in.observer.Observe(keyrate.Event{Key: key, Policy: keyrate.InflightPolicy, Cost: 1,
			Allowed: slot.Acquired(), Err: err, Shadow: in.shadow, Inflight: true})
	}
	if err == nil && slot.Acquired() {
		return slot, nil
	}
	var st error
	switch {
	case err == nil:
		st = status.Errorf(codes.ResourceExhausted, "grpclimit: too many calls in flight for %s (limit %d)", method, in.inflight.Limit())
		err = fmt.Errorf("%w: key %q has %d", ErrTooManyInFlight, key, in.inflight.Limit())
	case errors.Is(err, keyrate.ErrInvalidKey):
		st = status.Error(codes.Internal, "grpclimit: the call could not be limited in flight")
	default:
		st = status.Error(codes.Unavailable, "grpclimit: the in-flight limiter is unavailable")
	}
	if in.shadow {
		if in.onShadow != nil {
			in.onShadow(ctx, method, keyrate.Decision{}, err)
		}
		return inflight.Slot{}, nil
	}
	return inflight.Slot{}, st
}
