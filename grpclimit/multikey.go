package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/clientkey"
)

// KeysFunc gives the keys a call is limited on, all or nothing (see
// ByKeys): it appends them to keys, which is empty with room for
// keyrate.MaxKeys, and returns the result. Each key names its tier (from
// the limiter's Tier) and its cost; a zero Cost is the call's cost
// (WithCost's, 1 by default). An error wrapping ErrNoKey, or no keys, is a
// call without a key; another error, one that could not be keyed.
type KeysFunc func(ctx context.Context, fullMethod string, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error)

// ByKeys limits each call on several keys at once, each under its own
// tier, all or nothing (keyrate.AllowAll): a user and its organisation,
// say. The call goes on only if every key holds its cost, and a call one
// key denies is charged to none; a denied call ends with
// codes.ResourceExhausted and the denying key's RetryAfter. A limiter with
// its own AllowAllContext (redisbucket.Store: one script call) decides
// with it. The observer (WithObserver) is told the key that denied the
// call, or, when it is allowed, the key nearest to denying, under its
// policy, so metrics say which key denies; the status does not name it.
// Given ByKeys, the interceptor leaves the key and tier options unused;
// it needs a keyrate.PolicyLimiter. A key list AllowAll rejects (more
// than keyrate.MaxKeys keys, a key twice) ends the call with
// codes.Internal. A nil f makes New fail, as does WithInflight beside it:
// cap calls in flight with an interceptor of its own, New(nil,
// WithInflight(l)), chained before this one.
func ByKeys(f KeysFunc) Option {
	return func(c *config) {
		if f == nil {
			c.fail(fmt.Errorf("%w: grpclimit.ByKeys: a nil function", keyrate.ErrInvalidOption))
			return
		}
		c.keys = f
	}
}

// multiLimiter is a limiter that decides several keys its own way.
type multiLimiter interface {
	AllowAllContext(ctx context.Context, keys []keyrate.KeyCost) (keyrate.MultiDecision, error)
}

// keyBufs holds ByKeys's key buffers, so that a call allocates none.
var keyBufs = sync.Pool{New: func() any { return new([keyrate.MaxKeys]keyrate.KeyCost) }}

// allowKeys is allow under ByKeys.
func (in *Interceptor) allowKeys(ctx context.Context, method string) (keyrate.Decision, error) {
	buf := keyBufs.Get().(*[keyrate.MaxKeys]keyrate.KeyCost)
	defer func() {
		*buf = [keyrate.MaxKeys]keyrate.KeyCost{} // drop the keys' strings
		keyBufs.Put(buf)
	}()
	keys, err := in.keys(ctx, method, buf[:0])
	if err == nil && len(keys) == 0 {
		err = fmt.Errorf("%w: the keys function returned no key", ErrNoKey)
	}
	if err != nil {
		if in.observer != nil {
			in.observe("", keyrate.DefaultPolicy, 0, false, clientkey.Failed(err))
		}
		if errors.Is(err, ErrNoKey) {
			return keyrate.Decision{}, status.Error(in.noKeyCode, err.Error())
		}
		return keyrate.Decision{}, status.Error(codes.Internal, "grpclimit: the call could not be keyed")
	}
	cost := 1
	if in.cost != nil {
		cost = in.cost(ctx, method)
	}
	for i := range keys {
		if keys[i].Cost == 0 {
			keys[i].Cost = cost
		}
	}
	var d keyrate.MultiDecision
	if ml, ok := in.limiter.(multiLimiter); ok {
		d, err = ml.AllowAllContext(ctx, keys)
	} else {
		d, err = keyrate.AllowAll(in.policies, keys)
	}
	if in.observer != nil {
		k := keyrate.KeyCost{}
		if d.Index >= 0 && d.Index < len(keys) {
			k = keys[d.Index]
		}
		policy := d.Policy
		if policy == "" {
			policy = k.Tier.Name()
		}
		in.observe(k.Key, policy, k.Cost, d.Allowed, err)
	}
	if err != nil {
		if errors.Is(err, keyrate.ErrInvalidCost) || errors.Is(err, keyrate.ErrCostExceedsBurst) ||
			errors.Is(err, keyrate.ErrInvalidKey) || errors.Is(err, keyrate.ErrUnknownPolicy) ||
			errors.Is(err, keyrate.ErrInvalidKeys) {
			return keyrate.Decision{}, status.Error(codes.Internal, "grpclimit: the call could not be rate-limited")
		}
		return keyrate.Decision{}, status.Error(codes.Unavailable, "grpclimit: the rate limiter is unavailable")
	}
	return d.Decision, nil
}
