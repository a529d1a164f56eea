package grpclimit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestCalledWithoutGRPC: the interceptors called directly with nil
// arguments gRPC always gives (info, handler, the stream) return a
// codes.Internal error and spend nothing, rather than panicking; a nil
// context is Background.
func TestCalledWithoutGRPC(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(1))
	in, err := grpclimit.New(store, grpclimit.ByMethod())
	require.NoError(t, err)
	handler := func(context.Context, any) (any, error) { return "ok", nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/M"}
	for _, c := range []struct {
		name    string
		info    *grpc.UnaryServerInfo
		handler grpc.UnaryHandler
	}{{"nil info", nil, handler}, {"nil handler", info, nil}} {
		_, err := in.Unary(context.Background(), nil, c.info, c.handler)
		assert.Equal(t, codes.Internal, status.Code(err), c.name)
	}
	err = in.Stream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/svc/S"}, func(any, grpc.ServerStream) error { return nil })
	assert.Equal(t, codes.Internal, status.Code(err), "nil stream")
	assert.Equal(t, 0, store.Len(), "a refused misuse spent")

	got, err := in.Unary(nil, nil, info, handler) //nolint:staticcheck // a nil context is what this tests
	require.NoError(t, err, "nil ctx")
	assert.Equal(t, "ok", got)
}
