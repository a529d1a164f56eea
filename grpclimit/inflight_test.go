package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/inflight"
	"github.com/keyrate/keyrate/internal/conformance"
)

// holdPrefix begins the x-api-key of the unary calls the test server
// holds until the test lets them go.
const holdPrefix = "hold-"

// capServer is a real gRPC server on loopback with in's interceptors in
// front of the health service. A unary call whose key starts with
// holdPrefix waits, inside in's interceptor (so holding its slot), until
// release is closed; arrived tells when it got there. streamDone receives
// once each time in's stream interceptor has returned.
type capServer struct {
	client     healthpb.HealthClient
	arrived    chan struct{}
	release    chan struct{}
	streamDone chan struct{}
}

func serveCap(t *testing.T, in *grpclimit.Interceptor) *capServer {
	t.Helper()
	s := &capServer{arrived: make(chan struct{}, 16), release: make(chan struct{}), streamDone: make(chan struct{}, 16)}
	hold := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if k := md.Get("x-api-key"); len(k) == 1 && strings.HasPrefix(k[0], holdPrefix) {
			s.arrived <- struct{}{}
			<-s.release
		}
		return h(ctx, req)
	}
	after := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss) // in.Stream, which releases its slot before returning
		s.streamDone <- struct{}{}
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary, hold), grpc.ChainStreamInterceptor(after, in.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, conn.Close())
		srv.Stop()
		assert.NoError(t, <-done)
	})
	s.client = healthpb.NewHealthClient(conn)
	return s
}

func newCap(t *testing.T, n int) *inflight.Store {
	t.Helper()
	s, err := inflight.New(n)
	require.NoError(t, err)
	return s
}

// TestInflightUnary: with the cap alone, a key's n+1th concurrent call
// ends with ResourceExhausted naming the in-flight limit, another key's
// is served, and once the held call returns the key is served again.
func TestInflightUnary(t *testing.T) {
	in, err := grpclimit.New(nil, grpclimit.ByMetadata("x-api-key"), grpclimit.WithInflight(newCap(t, 1)))
	require.NoError(t, err)
	s := serveCap(t, in)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		assert.Equal(t, codes.OK, check(withKey(holdPrefix+"alice"), s.client).Code(), "the held call")
	}()
	<-s.arrived
	st := check(withKey(holdPrefix+"alice"), s.client)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Contains(t, st.Message(), "too many calls in flight")
	assert.Contains(t, st.Message(), "limit 1")
	assert.Equal(t, codes.OK, check(withKey("bob"), s.client).Code(), "another key")
	close(s.release)
	wg.Wait()
	assert.Equal(t, codes.OK, check(withKey(holdPrefix+"alice"), s.client).Code(), "after the held call returned")
}

// TestInflightStreamCancelled: an open stream holds its key's slot; a
// second stream of the key is refused; once the first is cancelled (its
// handler returns), the key is served again.
func TestInflightStreamCancelled(t *testing.T) {
	var log conformance.Recorder
	in, err := grpclimit.New(nil, grpclimit.ByMetadata("x-api-key"), grpclimit.WithInflight(newCap(t, 1)), grpclimit.WithObserver(&log))
	require.NoError(t, err)
	s := serveCap(t, in)
	ctx, cancel := context.WithCancel(withKey("alice"))
	defer cancel()
	w, err := s.client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w.Recv()
	require.NoError(t, err, "the first stream is admitted")

	w2, err := s.client.Watch(withKey("alice"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w2.Recv()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "a second stream while the first is open")
	<-s.streamDone

	cancel()
	<-s.streamDone // the first stream's handler returned
	assert.Equal(t, codes.OK, check(withKey("alice"), s.client).Code(), "after the stream was cancelled")

	events := log.Take()
	require.Len(t, events, 3)
	for i, allowed := range []bool{true, false, true} {
		assert.True(t, events[i].Inflight, "event %d is the cap's", i)
		assert.Equal(t, keyrate.InflightPolicy, events[i].Policy)
		assert.Equal(t, allowed, events[i].Allowed, "event %d", i)
	}
}

// TestInflightUnaryPanicReleases: a handler that panics gives its slot
// back (gRPC does not recover a handler's panic: the test calls Unary
// directly and recovers it).
func TestInflightUnaryPanicReleases(t *testing.T) {
	caps := newCap(t, 1)
	in, err := grpclimit.New(nil, grpclimit.ByMethod(), grpclimit.WithInflight(caps))
	require.NoError(t, err)
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	func() {
		defer func() { assert.NotNil(t, recover(), "the handler's panic") }()
		in.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) { panic("boom") })
	}()
	_, err = in.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) { return "ok", nil })
	assert.NoError(t, err, "the panicking call kept its slot")
}

// TestInflightBesideRate: a call the cap refuses spends no token, and one
// the rate limit denies holds no slot.
func TestInflightBesideRate(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(2))
	caps := newCap(t, 1)
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"), grpclimit.WithInflight(caps))
	require.NoError(t, err)
	s := serveCap(t, in)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		assert.Equal(t, codes.OK, check(withKey(holdPrefix+"a"), s.client).Code())
	}()
	<-s.arrived
	st := check(withKey(holdPrefix+"a"), s.client)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Contains(t, st.Message(), "in flight")
	close(s.release)
	wg.Wait()
	assert.Equal(t, 1, store.Peek(holdPrefix+"a").Remaining, "the cap's refusal spent a token")
	assert.Equal(t, codes.OK, check(withKey(holdPrefix+"a"), s.client).Code(), "held, and let go at once: release is closed")
	st = check(withKey(holdPrefix+"a"), s.client)
	assert.Equal(t, codes.ResourceExhausted, st.Code(), "the rate denies")
	assert.Contains(t, st.Message(), "rate limit")
	sl, _ := caps.TryAcquire(holdPrefix + "a")
	assert.True(t, sl.Acquired(), "the rate-denied call kept its slot")
	sl.Release()
}

// TestInflightShadow: shadow mode lets a call over the cap through and
// reports ErrTooManyInFlight.
func TestInflightShadow(t *testing.T) {
	caps := newCap(t, 1)
	var mu sync.Mutex
	var reports []error
	in, err := grpclimit.New(nil, grpclimit.ByMetadata("x-api-key"), grpclimit.WithInflight(caps),
		grpclimit.WithShadow(func(_ context.Context, _ string, _ keyrate.Decision, err error) {
			mu.Lock()
			reports = append(reports, err)
			mu.Unlock()
		}))
	require.NoError(t, err)
	s := serveCap(t, in)
	held, _ := caps.TryAcquire("alice")
	assert.Equal(t, codes.OK, check(withKey("alice"), s.client).Code(), "shadow mode never refuses")
	held.Release()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 1)
	assert.True(t, errors.Is(reports[0], grpclimit.ErrTooManyInFlight), "report %v", reports[0])
	sl, _ := caps.TryAcquire("alice")
	assert.True(t, sl.Acquired(), "the shadow pass holds a slot")
}

// TestInflightMisuse: New refuses a nil limiter without a cap, and a nil
// cap.
func TestInflightMisuse(t *testing.T) {
	var nilStore *inflight.Store
	_, err := grpclimit.New(nil)
	assert.ErrorIs(t, err, keyrate.ErrInvalidOption)
	_, err = grpclimit.New(nil, grpclimit.WithInflight(nil))
	assert.ErrorIs(t, err, keyrate.ErrInvalidOption)
	_, err = grpclimit.New(nil, grpclimit.WithInflight(nilStore))
	assert.ErrorIs(t, err, keyrate.ErrInvalidOption)
}

// TestInflightCostPanicReleases: a cost function that panics, after the
// call took its slot and before the handler runs, gives the slot back.
func TestInflightCostPanicReleases(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(100))
	caps := newCap(t, 1)
	boom := true
	in, err := grpclimit.New(store, grpclimit.ByMethod(), grpclimit.WithInflight(caps),
		grpclimit.WithCost(func(context.Context, string) int {
			if boom {
				panic("cost")
			}
			return 1
		}))
	require.NoError(t, err)
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	func() {
		defer func() { assert.NotNil(t, recover(), "the cost function's panic") }()
		in.Unary(context.Background(), nil, info, ok)
	}()
	boom = false
	_, err = in.Unary(context.Background(), nil, info, ok)
	assert.NoError(t, err, "the call whose cost function panicked kept its slot")
}
