package grpclimit

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
)

// Option configures the interceptors that New builds. Options apply in
// order; of the key options (ByPeer, ByMetadata, ByMethod, ByFunc) the last
// one wins.
type Option func(*config)

// KeyFunc returns the key of a call to the method fullMethod
// ("/package.Service/Method") whose context is ctx. An error wrapping
// ErrNoKey, or an empty key, is the client's omission (see WithNoKeyCode);
// any other error is a server fault (codes.Internal).
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ShadowFunc reports a call that WithShadow let through although the
// interceptor would have refused it: d is the limiter's decision for a
// denied call (d.Allowed is false), and err is nil; for a call that could
// not be decided, err says why (its status code is the one the call would
// have ended with) and d is the zero Decision; for a call over
// WithInflight's cap, err wraps ErrTooManyInFlight and d is the zero
// Decision.
type ShadowFunc func(ctx context.Context, fullMethod string, d keyrate.Decision, err error)

// config is what the options resolve to.
type config struct {
	key       KeyFunc
	cost      func(ctx context.Context, fullMethod string) int
	tier      func(ctx context.Context, fullMethod string) string
	noKeyCode codes.Code
	shadow    bool
	onShadow  ShadowFunc
	observer  keyrate.Observer // WithObserver's; nil for none
	keys      KeysFunc         // ByKeys's (multikey.go); nil for none
	inflight  inflight.Limiter // WithInflight's; nil for none
	err       error            // the first option that did not apply
}

// fail records the first option error.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// ByPeer keys calls by the peer's IP address, as grpc/peer reports it: an
// IPv4 client's key is its address ("192.0.2.1"), an IPv6 client's its /64
// prefix ("2001:db8:1:2::/64"), or its whole address for a link-local one
// (fe80::/10), as httplimit.ByIP keys them. A peer on a Unix socket is
// keyed "unix:" and the socket's name, shared by every peer of the socket;
// a peer on any other kind of listener is keyed by its network and
// address. It is the default key. Behind a proxy every call has the
// proxy's address: key by a metadata value the proxy sets (ByMetadata)
// there.
func ByPeer() Option {
	return func(c *config) { c.key = peerKey }
}

// ByMetadata keys calls by the first value of the incoming metadata key
// name, such as "x-api-key" (metadata keys are lower case; name is
// lowered as grpc/metadata does). A call without it, or with an empty
// value, is an error wrapping ErrNoKey. A name that is not a text
// metadata key makes New fail with an error wrapping
// keyrate.ErrInvalidOption: an empty one, one with a byte other than a
// letter, a digit, '-', '_' or '.' (except a pseudo-header's leading ':',
// as in ":authority"), or one ending in "-bin" (a binary value).
func ByMetadata(name string) Option {
	return func(c *config) {
		if !textMetadataKey(name) {
			c.fail(fmt.Errorf("%w: grpclimit.ByMetadata(%q): not a text metadata key", keyrate.ErrInvalidOption, name))
			return
		}
		c.key = metadataKey(strings.ToLower(name))
	}
}

// textMetadataKey reports whether name, once lowered, is a key that gRPC
// metadata can carry ([0-9a-z-_.], or a pseudo-header's ':' and those),
// and not a binary one. Only ASCII letters lower to a metadata key's
// (strings.ToLower would lower the Kelvin sign to 'k').
func textMetadataKey(name string) bool {
	if strings.HasSuffix(strings.ToLower(name), "-bin") {
		return false
	}
	rest := strings.TrimPrefix(name, ":")
	if rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch b := rest[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_', b == '.':
		default:
			return false
		}
	}
	return true
}

// ByMethod keys calls by their full method name ("/package.Service/Method"),
// so that each method has one bucket shared by every client: a limit on
// what the server accepts, not on what any one client sends.
//
// The name is the one the call carries. gRPC runs interceptors only for
// the methods a server registers, unless it has a
// grpc.UnknownServiceHandler: then a call to any name reaches the stream
// interceptor, and each name a client makes up gets a bucket of its own.
// On such a server, key with ByFunc, mapping the names the server does
// not serve to one key.
func ByMethod() Option {
	return func(c *config) {
		c.key = func(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }
	}
}

// ByFunc keys calls with key. A nil key makes New fail with an error
// wrapping keyrate.ErrInvalidOption.
func ByFunc(key KeyFunc) Option {
	return func(c *config) {
		if key == nil {
			c.fail(fmt.Errorf("%w: grpclimit.ByFunc(nil)", keyrate.ErrInvalidOption))
			return
		}
		c.key = key
	}
}

// WithCost sets the function that gives each call's cost in tokens. The
// default is 1 for every call (for a stream, at its start). A cost the
// limiter rejects (below 1, or above the Limit's Burst) is a server
// misconfiguration: the call ends with codes.Internal, never goes
// through. A nil cost keeps the default.
func WithCost(cost func(ctx context.Context, fullMethod string) int) Option {
	return func(c *config) { c.cost = cost }
}

// WithTier makes the interceptors decide each call under the policy
// (tier) that tier names for it, with the limiter's AllowTier: typically
// the client's plan, known once it is authenticated. The limiter must be
// a keyrate.PolicyLimiter; New returns an error wrapping
// keyrate.ErrInvalidOption for a limiter that is not one, and for a nil
// tier. A call for which tier returns "", or a name the limiter does not
// have, is decided by AllowN, as without this option, so that a wrong
// name never admits more than naming none.
func WithTier(tier func(ctx context.Context, fullMethod string) string) Option {
	return func(c *config) {
		if tier == nil {
			c.fail(fmt.Errorf("%w: grpclimit.WithTier(nil)", keyrate.ErrInvalidOption))
			return
		}
		c.tier = tier
	}
}

// WithNoKeyCode sets the status code of a call that carries no key (an
// error wrapping ErrNoKey from the key function, or an empty key). The
// default is codes.InvalidArgument: the client's omission, not a server
// fault; codes.Unauthenticated suits a key that is a credential. The call
// never goes through: codes.OK makes New fail with an error wrapping
// keyrate.ErrInvalidOption.
func WithNoKeyCode(code codes.Code) Option {
	return func(c *config) {
		if code == codes.OK {
			c.fail(fmt.Errorf("%w: grpclimit.WithNoKeyCode(codes.OK): a call without a key would go through unlimited", keyrate.ErrInvalidOption))
			return
		}
		c.noKeyCode = code
	}
}

// WithShadow turns on shadow mode: calls are decided as usual, but none is
// refused for the limiter's sake. A call the interceptor would have
// refused goes on to its handler and is reported to report, if it is not
// nil (see ShadowFunc). Allowed calls spend from their buckets as usual;
// a denied one spends nothing, so the buckets are what they would be
// without shadow mode. The default is off.
func WithShadow(report ShadowFunc) Option {
	return func(c *config) { c.shadow, c.onShadow = true, report }
}

// DefaultIPv6Prefix is the prefix length by which ByPeer groups IPv6
// clients: a /64 is the smallest block an ISP normally hands a subscriber.
const DefaultIPv6Prefix = 64

// metadataKey returns ByMetadata's key function for name.
func metadataKey(name string) KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: metadata %q is missing or empty", ErrNoKey, name)
	}
}
