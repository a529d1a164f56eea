package grpclimit_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestPeerTypedNilAddr: a peer whose Addr is a nil *net.TCPAddr (or any
// nil address: a custom transport's, or one an earlier interceptor wrote)
// has no address. ByPeer fails the call as for no peer (ErrNoPeer, a
// server fault: codes.Internal); it does not panic, which in a gRPC server
// (it recovers nothing) would end the process, nor key the call by the
// address's String(), "<nil>", which every such peer would share.
func TestPeerTypedNilAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
	}{
		{"tcp", (*net.TCPAddr)(nil)},
		{"unix", (*net.UnixAddr)(nil)},
		{"udp", (*net.UDPAddr)(nil)},
	} {
		t.Run("addr="+tc.name, func(t *testing.T) {
			store, _ := newStore(t, keyrate.PerMinute(10))
			in, err := grpclimit.New(store)
			require.NoError(t, err)
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: tc.addr})
			called := false
			var callErr error
			require.NotPanics(t, func() {
				_, callErr = in.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
					func(context.Context, any) (any, error) { called = true; return nil, nil })
			})
			assert.False(t, called, "a call without an address never reaches its handler")
			assert.Equal(t, codes.Internal, status.Code(callErr), "%v", callErr)
			assert.Equal(t, 0, store.Len(), "no key stored")
		})
	}
}

// TestPeerNilPeer: a context holding a nil *peer.Peer (peer.NewContext(ctx,
// nil), which an earlier interceptor or a test harness may write;
// peer.FromContext then reports it with ok true) has no address either:
// ByPeer fails the call as for no peer (codes.Internal), calling no
// handler, rather than dereferencing the nil peer and panicking, which in
// a gRPC server would end the process.
func TestPeerNilPeer(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(10))
	in, err := grpclimit.New(store)
	require.NoError(t, err)
	ctx := peer.NewContext(context.Background(), nil)
	called := false
	var callErr error
	require.NotPanics(t, func() {
		_, callErr = in.Unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: checkMethod},
			func(context.Context, any) (any, error) { called = true; return nil, nil })
	})
	assert.False(t, called, "a call without a peer never reaches its handler")
	assert.Equal(t, codes.Internal, status.Code(callErr), "%v", callErr)
	assert.Equal(t, 0, store.Len(), "no key stored")
}
