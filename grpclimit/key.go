package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/grpc/peer"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/clientkey"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Errors a key function returns.
var (
	// ErrNoKey reports a call the key function found no key in: the
	// metadata ByMetadata reads is missing or empty, or a custom key
	// function returned "". An empty key is never used, so that keyless
	// calls do not share one bucket.
	// It wraps keyrate.ErrInvalidKey.
	ErrNoKey = fmt.Errorf("grpclimit: call has no key (%w)", keyrate.ErrInvalidKey)

	// ErrNoPeer reports a call whose context has no peer (grpc/peer), a
	// nil *peer.Peer, or a peer with a nil address, so that ByPeer has no address: not a call
	// a gRPC server makes.
	ErrNoPeer = errors.New("grpclimit: call has no peer address")
)

// peerKey is ByPeer's key function.
func peerKey(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p == nil || isnil.Is(p.Addr) { // a nil *Peer, a nil *net.TCPAddr too: no address
		return "", ErrNoPeer
	}
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return clientkey.FromAddr(ip, DefaultIPv6Prefix), nil
		}
	case *net.UnixAddr:
		// The peer names its own address, if any: key by the
		// listener's socket, which every peer shares.
		if p.LocalAddr != nil {
			return "unix:" + p.LocalAddr.String(), nil
		}
		return "unix:", nil
	}
	if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		return clientkey.FromAddr(ap.Addr(), DefaultIPv6Prefix), nil
	}
	if s := p.Addr.String(); s != "" {
		return p.Addr.Network() + ":" + s, nil
	}
	return "", fmt.Errorf("%w: %s peer with an empty address", ErrNoPeer, p.Addr.Network())
}
