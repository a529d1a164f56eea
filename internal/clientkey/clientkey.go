// Package clientkey turns a client's IP address into its rate-limit key,
// the same way for every adapter (httplimit's ByIP, grpclimit's ByPeer).
package clientkey

import (
	"errors"
	"net/netip"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/wrap"
)

// FromAddr returns the key of the client at addr, which must be valid:
// an IPv4 address (IPv4-mapped IPv6 included) is its own key
// ("192.0.2.1"); an IPv6 address is keyed by its prefix of v6bits bits
// ("2001:db8:1:2::/64"), except a link-local one (fe80::/10), whose prefix
// every host on every link shares, and any address when v6bits is 128 (or
// out of [1, 128]): those are keyed by the whole address, without its zone
// ("fe80::1").
func FromAddr(addr netip.Addr, v6bits int) string {
	addr = addr.WithZone("").Unmap()
	if addr.Is4() || v6bits >= 128 || v6bits < 1 || addr.IsLinkLocalUnicast() {
		return addr.String()
	}
	p, err := addr.Prefix(v6bits)
	if err != nil { // unreachable: v6bits is in [1, 127] and addr is IPv6
		return addr.String()
	}
	return p.String()
}

// Failed returns err, an adapter's key function's failure to key a
// request, as its observer reports it: err itself if it already wraps
// keyrate.ErrInvalidKey (a request without a key), else err wrapped in
// it, so that a request the adapter could not key (a client address that
// does not parse, a key function's own error) counts as a key failure,
// not as a store's.
func Failed(err error) error {
	if errors.Is(err, keyrate.ErrInvalidKey) {
		return err
	}
	return wrap.Errorf("%w: %w", keyrate.ErrInvalidKey, err)
}
