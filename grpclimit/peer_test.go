package grpclimit_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// serveOn serves the health service behind in's interceptors on lis, and
// returns a client dialled at target and the health server (to push
// Watch updates); both stop when the test ends.
func serveOn(t *testing.T, in *grpclimit.Interceptor, lis net.Listener, target string) (healthpb.HealthClient, *health.Server) {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary), grpc.ChainStreamInterceptor(in.Stream))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, conn.Close())
		srv.Stop()
		assert.NoError(t, <-done)
	})
	return healthpb.NewHealthClient(conn), hs
}

// TestPeerUnixSocket: over a real Unix socket every peer (each a
// connection of its own, with no name) shares the socket's one key,
// "unix:" and its path, as ByPeer documents; no peer gets a bucket of its
// own by connecting again.
func TestPeerUnixSocket(t *testing.T) {
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: 1 << 40, Burst: 2})
	in, err := grpclimit.New(store)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", path)
	require.NoError(t, err)
	a, _ := serveOn(t, in, lis, "unix://"+path)
	b, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer b.Close()
	bc := healthpb.NewHealthClient(b)

	assert.Equal(t, codes.OK, check(context.Background(), a).Code())
	assert.Equal(t, codes.OK, check(context.Background(), bc).Code(), "the second connection")
	assert.Equal(t, codes.ResourceExhausted, check(context.Background(), bc).Code(), "shares the first's bucket")
	assert.Equal(t, codes.ResourceExhausted, check(context.Background(), a).Code())
	assert.Equal(t, 1, store.Len())
	assert.Equal(t, 0, store.Peek("unix:"+path).Remaining, "the key is the socket's path")
}

// TestPeerDualStack: on a dual-stack listener an IPv4 client arrives as an
// IPv4-mapped IPv6 address (::ffff:127.0.0.1); it is keyed as IPv4, by its
// whole address, not by the /64 every IPv4 client would share. An IPv6
// client is keyed by its /64.
func TestPeerDualStack(t *testing.T) {
	lis, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skipf("no IPv6 on this machine: %v", err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	store, _ := newStore(t, keyrate.PerMinute(10))
	in, err := grpclimit.New(store)
	require.NoError(t, err)
	v4, _ := serveOn(t, in, lis, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.Equal(t, codes.OK, check(context.Background(), v4).Code())
	assert.Equal(t, 9, store.Peek("127.0.0.1").Remaining, "keyed by the IPv4 address")

	v6conn, err := grpc.NewClient(net.JoinHostPort("::1", strconv.Itoa(port)), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer v6conn.Close()
	st := check(context.Background(), healthpb.NewHealthClient(v6conn))
	if st.Code() == codes.Unavailable { // dual-stack socket but no ::1
		t.Skipf("no IPv6 loopback: %v", st.Err())
	}
	require.Equal(t, codes.OK, st.Code())
	assert.Equal(t, 9, store.Peek("::/64").Remaining, "an IPv6 client is keyed by its /64")
	assert.Equal(t, 2, store.Len())
}
