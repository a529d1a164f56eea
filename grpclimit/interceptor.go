package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/clientkey"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Interceptor rate-limits gRPC calls: its Unary and Stream methods are a
// grpc.UnaryServerInterceptor and a grpc.StreamServerInterceptor that
// share one configuration and the limiter's buckets. It is safe for
// concurrent use. Create one with New: one that New did not make (the zero
// Interceptor, or a nil *Interceptor) ends every call with codes.Internal,
// calling no handler, rather than panicking in the server.
type Interceptor struct {
	limiter keyrate.Limiter
	// policies is limiter as a PolicyLimiter, or nil if it is not one.
	policies keyrate.PolicyLimiter
	// ctxLimiter and ctxPolicies are limiter as one that takes the call's
	// context, or nil.
	ctxLimiter  contextLimiter
	ctxPolicies contextPolicies
	config
	// made is set by New.
	made bool
}

// contextLimiter is a limiter whose AllowN can take a context.
type contextLimiter interface {
	AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error)
}

// contextPolicies is a policy limiter whose AllowTier can take a context.
type contextPolicies interface {
	AllowTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error)
}

// New returns interceptors that rate-limit calls with limiter: each call
// is keyed (ByPeer by default), costed (1 by default) and decided by one
// call to limiter.AllowN, or to AllowTier when WithTier names the call's
// policy. See the package documentation for the status of a refused call.
//
// With WithInflight, calls are also capped in flight per key; limiter may
// then be nil, for the cap alone.
//
// New returns an error wrapping keyrate.ErrInvalidOption if limiter is nil
// without WithInflight, or holds a nil pointer of a limiter type, such as
// (*atomicbucket.Store)(nil); if WithTier is given with a limiter that is
// not a keyrate.PolicyLimiter; or if an option is invalid.
func New(limiter keyrate.Limiter, opts ...Option) (*Interceptor, error) {
	if limiter != nil && isnil.Is(limiter) {
		return nil, fmt.Errorf("%w: grpclimit.New: the limiter is a nil %T", keyrate.ErrInvalidOption, limiter)
	}
	c := config{key: peerKey, noKeyCode: codes.InvalidArgument}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if limiter == nil && c.inflight == nil {
		return nil, fmt.Errorf("%w: grpclimit.New: the limiter is nil, and no WithInflight cap is given", keyrate.ErrInvalidOption)
	}
	in := &Interceptor{limiter: limiter, config: c, made: true}
	in.policies, _ = limiter.(keyrate.PolicyLimiter)
	if c.tier != nil && in.policies == nil {
		return nil, fmt.Errorf("%w: grpclimit.WithTier needs a keyrate.PolicyLimiter, and %T is not one", keyrate.ErrInvalidOption, limiter)
	}
	if c.keys != nil && c.inflight != nil {
		return nil, fmt.Errorf("%w: grpclimit.ByKeys does not take WithInflight (chain an interceptor of New(nil, WithInflight(l)) before it)", keyrate.ErrInvalidOption)
	}
	if c.keys != nil && in.policies == nil {
		return nil, fmt.Errorf("%w: grpclimit.ByKeys needs a keyrate.PolicyLimiter, and %T is not one", keyrate.ErrInvalidOption, limiter)
	}
	in.ctxLimiter, _ = limiter.(contextLimiter)
	if in.policies != nil {
		in.ctxPolicies, _ = limiter.(contextPolicies)
	}
	return in, nil
}

// errNotFromNew ends a call through an Interceptor that New did not make.
var errNotFromNew = status.Error(codes.Internal, "grpclimit: the Interceptor was not made by grpclimit.New")

// Unary is a grpc.UnaryServerInterceptor: it decides the call and either
// calls handler or returns the refusal's status error. Called other than
// by gRPC, without info or handler, it returns a codes.Internal error and
// decides nothing; a nil ctx is context.Background().
func (in *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info == nil || handler == nil {
		return nil, status.Error(codes.Internal, "grpclimit: Unary called without its UnaryServerInfo or handler")
	}
	if in == nil || !in.made {
		return nil, errNotFromNew
	}
	if ctx == nil {
		ctx = context.Background()
	}
	slot, err := in.decide(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer slot.Release()
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: it decides the stream once,
// when it starts, with the stream's context, and either calls handler or
// returns the refusal's status error. Messages on an admitted stream are
// not limited. Called other than by gRPC, without ss, info or handler, it
// returns a codes.Internal error and decides nothing.
func (in *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if ss == nil || info == nil || handler == nil {
		return status.Error(codes.Internal, "grpclimit: Stream called without its ServerStream, StreamServerInfo or handler")
	}
	if in == nil || !in.made {
		return errNotFromNew
	}
	ctx := ss.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	slot, err := in.decide(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	defer slot.Release()
	return handler(srv, ss)
}

// decide returns nil if the call to method may proceed, with the slot of
// WithInflight's cap it holds (the zero Slot without one), and otherwise
// the status error to end it with. In shadow mode it reports that error
// and returns nil.
func (in *Interceptor) decide(ctx context.Context, method string) (inflight.Slot, error) {
	slot, d, err := in.allow(ctx, method)
	if err == nil && d.Allowed {
		return slot, nil
	}
	if in.shadow {
		if in.onShadow != nil {
			in.onShadow(ctx, method, d, err) // err is nil for a denial
		}
		return slot, nil
	}
	slot.Release()
	if err == nil {
		err = denied(method, d)
	}
	return inflight.Slot{}, err
}

// allow keys, costs and decides the call, taking a slot of the in-flight
// cap first if there is one; an error is the status error the call ends
// with, and the slot, if any, is the caller's to release.
func (in *Interceptor) allow(ctx context.Context, method string) (slot inflight.Slot, _ keyrate.Decision, _ error) {
	if in.keys != nil {
		d, err := in.allowKeys(ctx, method) // ByKeys (multikey.go)
		return slot, d, err
	}
	key, err := in.key(ctx, method)
	if err == nil && key == "" {
		err = fmt.Errorf("%w: the key function returned an empty key", ErrNoKey)
	}
	if err != nil {
		if in.observer != nil {
			in.observe(key, keyrate.DefaultPolicy, 0, false, clientkey.Failed(err))
		}
		if errors.Is(err, ErrNoKey) {
			return slot, keyrate.Decision{}, status.Error(in.noKeyCode, err.Error())
		}
		return slot, keyrate.Decision{}, status.Error(codes.Internal, "grpclimit: the call could not be keyed")
	}
	if in.inflight != nil {
		if slot, err = in.acquireSlot(ctx, method, key); err != nil {
			return slot, keyrate.Decision{}, err
		}
	}
	if in.limiter == nil {
		return slot, keyrate.Decision{Allowed: true}, nil // a WithInflight cap alone
	}
	if in.inflight != nil {
		// A cost or tier function, or the limiter, that panics gives the
		// slot back: the caller's defer is not in place yet.
		panicked := true
		defer func() {
			if panicked {
				slot.Release()
			}
		}()
		d, err := in.rate(ctx, method, key)
		panicked = false
		return slot, d, err
	}
	d, err := in.rate(ctx, method, key)
	return slot, d, err
}

// rate costs and decides the call of key by the rate limiter; an error
// is the status error the call ends with.
func (in *Interceptor) rate(ctx context.Context, method, key string) (keyrate.Decision, error) {
	cost := 1
	if in.cost != nil {
		cost = in.cost(ctx, method)
	}
	var (
		d       keyrate.Decision
		err     error
		tier    keyrate.Tier
		useTier bool
	)
	if in.tier != nil {
		if name := in.tier(ctx, method); name != "" {
			if t, err := in.policies.Tier(name); err == nil {
				tier, useTier = t, true
			}
		}
	}
	switch {
	case useTier && in.ctxPolicies != nil:
		d, err = in.ctxPolicies.AllowTierContext(ctx, key, tier, cost)
	case useTier:
		d, err = in.policies.AllowTier(key, tier, cost)
	case in.ctxLimiter != nil:
		d, err = in.ctxLimiter.AllowNContext(ctx, key, cost)
	default:
		d, err = in.limiter.AllowN(key, cost)
	}
	if in.observer != nil {
		policy := d.Policy
		if policy == "" {
			policy = tier.Name()
		}
		in.observe(key, policy, cost, d.Allowed, err)
	}
	if err != nil {
		if errors.Is(err, keyrate.ErrInvalidCost) || errors.Is(err, keyrate.ErrCostExceedsBurst) ||
			errors.Is(err, keyrate.ErrInvalidKey) || errors.Is(err, keyrate.ErrUnknownPolicy) {
			return keyrate.Decision{}, status.Error(codes.Internal, "grpclimit: the call could not be rate-limited")
		}
		return keyrate.Decision{}, status.Error(codes.Unavailable, "grpclimit: the rate limiter is unavailable")
	}
	return d, nil
}

// denied returns the status error of a call to method that d denied:
// codes.ResourceExhausted with a RetryInfo detail of d.RetryAfter, or of
// 1ns if d.RetryAfter is not positive (a Limiter that gets it wrong: a
// deny never tells the client to retry at once, nor in the past).
func denied(method string, d keyrate.Decision) error {
	retry := max(d.RetryAfter, time.Nanosecond)
	st := status.Newf(codes.ResourceExhausted, "grpclimit: rate limit exceeded for %s; retry after %v", method, retry)
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = ds
	}
	return st.Err()
}
