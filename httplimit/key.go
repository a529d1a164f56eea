package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/wrap"
)

// Errors a key function returns. The middleware passes them, wrapped with
// the values involved, to the error handler (see WithErrorHandler).
var (
	// ErrNoKey reports a request the key function found no key in: the
	// header ByHeader reads is missing or empty, or a custom key function
	// returned "". An empty key is never used, so that keyless requests do
	// not share one bucket.
	// It wraps keyrate.ErrInvalidKey.
	ErrNoKey = fmt.Errorf("httplimit: request has no key (%w)", keyrate.ErrInvalidKey)

	// ErrBadAddress reports an address ByIP could not parse where it needed
	// one: the connection's remote address, or an entry of a forwarding
	// header that a trusted proxy wrote.
	ErrBadAddress = errors.New("httplimit: bad client address")
)

// ByHeader keys requests by the value of the request header name, such as
// "X-API-Key". A request without the header, or with an empty value, is an
// error wrapping ErrNoKey. Of repeated header lines the first is used. A
// name that is not a valid header field name makes New fail with an error
// wrapping keyrate.ErrInvalidOption.
func ByHeader(name string) Option {
	return func(c *config) {
		if !validFieldName(name) {
			c.fail(fmt.Errorf("%w: httplimit.ByHeader(%q): not a valid header field name", keyrate.ErrInvalidOption, name))
			return
		}
		canon := http.CanonicalHeaderKey(name)
		c.key = func(r *http.Request) (string, error) {
			if v := r.Header[canon]; len(v) > 0 && v[0] != "" {
				return v[0], nil
			}
			return "", fmt.Errorf("%w: header %s is missing or empty", ErrNoKey, canon)
		}
	}
}

// ByFunc keys requests with key. An empty key, or an error from key that
// wraps ErrNoKey, sends the request to the no-key handler (400 by
// default, see WithNoKeyHandler); any other error from key, to the error
// handler (500 by default). A nil key makes New fail with an error
// wrapping keyrate.ErrInvalidOption.
func ByFunc(key func(*http.Request) (string, error)) Option {
	return func(c *config) {
		if key == nil {
			c.fail(fmt.Errorf("%w: httplimit.ByFunc(nil)", keyrate.ErrInvalidOption))
			return
		}
		c.key = key
	}
}

// IPOption configures ByIP.
type IPOption func(*ipKey) error

// DefaultIPv6Prefix is the prefix length by which ByIP groups IPv6 clients
// unless IPv6Prefix says otherwise: a /64 is the smallest block an ISP
// normally hands a subscriber, and one host can use any address in it.
const DefaultIPv6Prefix = 64

// ByIP keys requests by the client's IP address. It is the default key.
//
// The client is the connection's remote address (http.Request.RemoteAddr),
// unless that address is in a trusted proxy range (TrustProxies). Then the
// forwarding header the proxies set (ForwardedHeader, X-Forwarded-For by
// default) is read as a chain of addresses, the original client first and
// each proxy appending the address it received the request from, with the
// connection's address last. The chain is walked from the right, skipping
// trusted proxies, and the first address that is not a trusted proxy is the
// client. Entries to its left are the client's own claims and are never
// read, so a client cannot choose its key by sending the header itself. If
// every address is a trusted proxy, the left-most is used. An entry that
// must be read but is not an IP address (a port is allowed, as is
// Forwarded's quoted "[v6]:port" form; "unknown" and obfuscated identifiers
// are not) is an error wrapping ErrBadAddress.
//
// IPv4-mapped IPv6 addresses count as IPv4. An IPv4 client's key is its
// address ("192.0.2.1"); an IPv6 client's is its /64 prefix
// ("2001:db8:1:2::/64"), or the prefix IPv6Prefix sets, except for a
// link-local address (fe80::/10), whose prefix every host on every link
// shares: its key is the whole address, without the zone ("fe80::1"). (So
// a host on the server's own link can take as many keys as it configures
// link-local addresses, and hosts with one link-local address on two
// links share a key; neither reaches the server from beyond its links.)
//
// A request that came over a Unix socket (an http.Server serving a Unix
// listener) has no IP address: net/http sets its RemoteAddr to the peer's
// socket name, "" or "@" (Linux) for the usual unbound peer, and whatever
// path a peer bound its socket to, which may read as an IP address. So
// RemoteAddr is never read for such a request: its key is "unix:"
// followed by the socket's name as the listener has it
// ("unix:/run/app.sock"), and every peer of one socket counts as one
// local client and shares one bucket. Behind a proxy that connects over a
// Unix socket every client would share it too, and forwarding headers are
// not read from such a peer (nor an address a middleware wrote into
// RemoteAddr): key by the proxy's header with ByHeader or ByFunc there.
//
// With no trusted proxies (the default) the key costs no allocation for an
// IPv4 client. A key read from a forwarding header line longer than 128
// bytes is a copy (one allocation), so that a store holding the key does
// not hold the line. An invalid IPOption makes New fail with an error wrapping
// keyrate.ErrInvalidOption.
func ByIP(opts ...IPOption) Option {
	return func(c *config) {
		k := &ipKey{header: "X-Forwarded-For", v6bits: DefaultIPv6Prefix}
		for _, opt := range opts {
			if opt == nil {
				continue
			}
			if err := opt(k); err != nil {
				c.fail(wrap.Errorf("%w: httplimit.ByIP: %w", keyrate.ErrInvalidOption, err))
				return
			}
		}
		c.key = k.key
	}
}

// TrustProxies adds the ranges, in CIDR notation ("10.0.0.0/8",
// "2001:db8::/32") or as single addresses, whose connections ByIP trusts to
// report the client in the forwarding header. The default is none: the
// forwarding headers are ignored.
func TrustProxies(cidrs ...string) IPOption {
	return func(k *ipKey) error {
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil || a.Zone() != "" {
					return fmt.Errorf("TrustProxies: %q is neither a CIDR range nor an IP address", s)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if p.Addr().Is4In6() {
				bits := p.Bits() - 96
				if bits < 0 {
					return fmt.Errorf("TrustProxies: %q: an IPv4-mapped range needs at least 96 bits", s)
				}
				p = netip.PrefixFrom(p.Addr().Unmap(), bits)
			}
			k.trusted = append(k.trusted, p.Masked())
		}
		return nil
	}
}

// ForwardedHeader sets the one forwarding header ByIP reads from trusted
// proxies: "X-Forwarded-For" (the default), "Forwarded" (RFC 7239, its for=
// parameters) or "X-Real-IP". Only one is read, because a proxy that sets
// one of them passes the others on from the client unchanged: reading
// those would let a client choose its key. Any other name is an error.
func ForwardedHeader(name string) IPOption {
	return func(k *ipKey) error {
		switch canon := http.CanonicalHeaderKey(name); canon {
		case "X-Forwarded-For", "Forwarded", "X-Real-Ip":
			k.header = canon
			return nil
		default:
			return fmt.Errorf("ForwardedHeader: %q is not Forwarded, X-Forwarded-For or X-Real-IP", name)
		}
	}
}

// IPv6Prefix sets the prefix length, from 1 to 128, by which ByIP groups
// IPv6 clients into one key. The default is DefaultIPv6Prefix (64); 128 keys
// each IPv6 address on its own, as ByIP always keys a link-local one.
func IPv6Prefix(bits int) IPOption {
	return func(k *ipKey) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("IPv6Prefix(%d): the prefix length must be in [1, 128]", bits)
		}
		k.v6bits = bits
		return nil
	}
}

// validFieldName reports whether name is an HTTP field name: a non-empty
// token (RFC 9110, section 5.1).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}
