package grpclimit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

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
// has no address. ByPeer must fail the call as for no peer (ErrNoPeer, a
// server fault: codes.Internal), not panic, which in a gRPC server (it
// recovers nothing) ends the process; nor key it by the address's
// String(), "<nil>", which every such peer would share.
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

// TestShadowDenialReportsNilErr: ShadowFunc's doc says that for a denied
// call d is the decision (d.Allowed false) and err is nil, keeping err for
// calls that could not be decided (as httplimit's ShadowFunc does), so
// that a report function can tell a would-be denial from a failure by
// err. A denial must not be reported with the ResourceExhausted error.
func TestShadowDenialReportsNilErr(t *testing.T) {
	type report struct {
		d   keyrate.Decision
		err error
	}
	var (
		mu      sync.Mutex
		reports []report
	)
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Minute, Burst: 1})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"),
		grpclimit.WithShadow(func(_ context.Context, _ string, d keyrate.Decision, err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, report{d, err})
		}))
	require.NoError(t, err)
	client := serve(t, in)
	require.Equal(t, codes.OK, check(withKey("alice"), client).Code())
	require.Equal(t, codes.OK, check(withKey("alice"), client).Code(), "shadow mode lets the denial through")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 1)
	assert.False(t, reports[0].d.Allowed)
	assert.Equal(t, time.Minute, reports[0].d.RetryAfter)
	assert.NoError(t, reports[0].err, "a denial is reported with a nil err")
}
