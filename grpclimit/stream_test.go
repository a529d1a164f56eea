package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestStreamMessagesNotLimited: as Stream's doc says, a stream is decided
// once, when it starts, and the messages of an admitted stream are not
// limited: it keeps receiving after its key's bucket is empty, while a new
// stream or call of the key is denied. Each stream start is one observer
// event, each message none.
func TestStreamMessagesNotLimited(t *testing.T) {
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1})
	var log conformance.Recorder
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"), grpclimit.WithObserver(&log))
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	client, hs := serveOn(t, in, lis, lis.Addr().String())

	ctx, cancel := context.WithCancel(withKey("alice"))
	defer cancel()
	w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	resp, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	require.Equal(t, codes.ResourceExhausted, check(withKey("alice"), client).Code(), "the stream spent alice's token")

	// Each status change is one message on the stream.
	for i, s := range []healthpb.HealthCheckResponse_ServingStatus{
		healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING,
		healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING,
	} {
		hs.SetServingStatus("", s)
		resp, err := w.Recv()
		require.NoError(t, err, "message %d on the admitted stream", i+2)
		require.Equal(t, s, resp.GetStatus())
	}

	w2, err := client.Watch(withKey("alice"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w2.Recv()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "a new stream is denied")
	assert.Equal(t, time.Hour, retryDelay(st))

	events := log.Take()
	require.Len(t, events, 3, "the first stream, the denied call, the denied stream: no event per message")
	assert.True(t, events[0].Allowed)
	assert.False(t, events[1].Allowed)
	assert.False(t, events[2].Allowed)
}
