package grpclimit_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/grpclimit"
)

// Methods of the health service, the real gRPC service the tests serve: a
// unary Check and a server-streaming Watch.
const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

// serve starts a real gRPC server on a loopback TCP port, with the health
// service behind in's interceptors, and returns a client connected to it;
// both stop when the test ends.
func serve(t *testing.T, in *grpclimit.Interceptor) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary), grpc.ChainStreamInterceptor(in.Stream))
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
	return healthpb.NewHealthClient(conn)
}

// withKey returns a context whose outgoing metadata carries x-api-key.
func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

// newStore returns an atomicbucket store under limit on a manual clock.
func newStore(t *testing.T, limit keyrate.Limit, opts ...keyrate.Option) (*atomicbucket.Store, *clock.Manual) {
	t.Helper()
	c := clock.NewManual(0)
	s, err := atomicbucket.New(limit, append([]keyrate.Option{keyrate.WithClock(c)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, c
}

// check makes a Check call in ctx and returns its status.
func check(ctx context.Context, c healthpb.HealthClient) *status.Status {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return status.Convert(err)
}

// retryDelay returns the RetryInfo detail's delay of st, or -1 if it has
// none.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return -1
}

func TestUnaryDeniesWithRetryInfo(t *testing.T) {
	store, clk := newStore(t, keyrate.Limit{Rate: 1, Per: 2 * time.Second, Burst: 2})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("X-API-Key"))
	require.NoError(t, err)
	client := serve(t, in)

	for i := range 2 {
		require.Equal(t, codes.OK, check(withKey("alice"), client).Code(), "call %d of a burst of 2", i+1)
	}
	st := check(withKey("alice"), client)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "third call: %v", st.Err())
	assert.Equal(t, 2*time.Second, retryDelay(st), "RetryInfo's delay is the decision's RetryAfter")
	assert.Contains(t, st.Message(), checkMethod)
	assert.NotContains(t, st.Message(), "alice", "the message must not reveal the key")

	assert.Equal(t, codes.OK, check(withKey("bob"), client).Code(), "another key has its own bucket")
	clk.Advance(2*time.Second - 1)
	assert.Equal(t, codes.ResourceExhausted, check(withKey("alice"), client).Code(), "1ns before the retry delay")
	clk.Advance(1)
	assert.Equal(t, codes.OK, check(withKey("alice"), client).Code(), "at the retry delay")
}

func TestStreamDecidedOnceAtStart(t *testing.T) {
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"))
	require.NoError(t, err)
	client := serve(t, in)

	ctx, cancel := context.WithCancel(withKey("alice"))
	defer cancel()
	w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	resp, err := w.Recv()
	require.NoError(t, err, "the first stream is admitted")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	assert.Equal(t, 0, store.Peek("alice").Remaining, "the stream spent the key's one token")

	w2, err := client.Watch(withKey("alice"), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w2.Recv()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "second stream: %v", err)
	assert.Equal(t, time.Hour, retryDelay(st))
	assert.Contains(t, st.Message(), watchMethod)
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  grpclimit.Option
		key  string // the bucket a call from 127.0.0.1 with x-api-key alice spends from
	}{
		{"ByPeer", grpclimit.ByPeer(), "127.0.0.1"},
		{"default", nil, "127.0.0.1"},
		{"ByMetadata", grpclimit.ByMetadata("x-api-key"), "alice"},
		{"ByMethod", grpclimit.ByMethod(), checkMethod},
		{"ByFunc", grpclimit.ByFunc(func(_ context.Context, m string) (string, error) { return "f" + m, nil }), "f" + checkMethod},
	} {
		t.Run("key="+tc.name, func(t *testing.T) {
			store, _ := newStore(t, keyrate.PerMinute(10))
			in, err := grpclimit.New(store, tc.opt)
			require.NoError(t, err)
			client := serve(t, in)
			require.Equal(t, codes.OK, check(withKey("alice"), client).Code())
			assert.Equal(t, 1, store.Len(), "keys tracked")
			assert.Equal(t, 9, store.Peek(tc.key).Remaining, "tokens left under key %q", tc.key)
		})
	}
}

func TestNoKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []grpclimit.Option
		ctx  context.Context
		want codes.Code
	}{
		{"metadata missing", []grpclimit.Option{grpclimit.ByMetadata("x-api-key")}, context.Background(), codes.InvalidArgument},
		{"metadata empty", []grpclimit.Option{grpclimit.ByMetadata("x-api-key")}, withKey(""), codes.InvalidArgument},
		{"empty key from ByFunc", []grpclimit.Option{grpclimit.ByFunc(func(context.Context, string) (string, error) { return "", nil })}, context.Background(), codes.InvalidArgument},
		{"WithNoKeyCode", []grpclimit.Option{grpclimit.ByMetadata("x-api-key"), grpclimit.WithNoKeyCode(codes.Unauthenticated)}, context.Background(), codes.Unauthenticated},
		{"key function fails", []grpclimit.Option{grpclimit.ByFunc(func(context.Context, string) (string, error) { return "", errors.New("secret detail") })}, context.Background(), codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := newStore(t, keyrate.PerMinute(10))
			in, err := grpclimit.New(store, tc.opts...)
			require.NoError(t, err)
			client := serve(t, in)
			st := check(tc.ctx, client)
			assert.Equal(t, tc.want, st.Code(), "status: %v", st.Err())
			assert.NotContains(t, st.Message(), "secret detail")
			assert.Equal(t, 0, store.Len(), "a call without a key stores nothing")
		})
	}
}

// failing is a Limiter whose AllowN fails with err; with ctx set, it is a
// context-taking limiter that records the context it was called with.
type failing struct {
	keyrate.Limiter
	err error
	ctx chan context.Context
}

func (f *failing) AllowN(string, int) (keyrate.Decision, error) {
	return keyrate.Decision{}, f.err
}

// contextual is a failing limiter that takes a context.
type contextual struct{ *failing }

func (f contextual) AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error) {
	f.ctx <- ctx
	return f.AllowN(key, cost)
}

func TestFailures(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(10))
	for _, tc := range []struct {
		name    string
		limiter keyrate.Limiter
		opts    []grpclimit.Option
		want    codes.Code
	}{
		{"store error", &failing{Limiter: store, err: errors.New("connection refused")}, nil, codes.Unavailable},
		{"cost above burst", store, []grpclimit.Option{grpclimit.WithCost(func(context.Context, string) int { return 11 })}, codes.Internal},
		{"cost below 1", store, []grpclimit.Option{grpclimit.WithCost(func(context.Context, string) int { return 0 })}, codes.Internal},
		{"invalid key", &failing{Limiter: store, err: keyrate.ErrInvalidKey}, nil, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := grpclimit.New(tc.limiter, tc.opts...)
			require.NoError(t, err)
			client := serve(t, in)
			st := check(withKey("alice"), client)
			assert.Equal(t, tc.want, st.Code(), "status: %v", st.Err())
			assert.NotContains(t, st.Message(), "connection refused", "the store's error is not sent to the client")
		})
	}
	assert.Equal(t, 0, store.Len(), "no failed call stored a key")
}

func TestContextReachesStore(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(10))
	f := contextual{&failing{Limiter: store, err: errors.New("down"), ctx: make(chan context.Context, 1)}}
	in, err := grpclimit.New(f, grpclimit.ByMetadata("x-api-key"))
	require.NoError(t, err)
	client := serve(t, in)
	ctx, cancel := context.WithTimeout(withKey("alice"), time.Hour)
	defer cancel()
	assert.Equal(t, codes.Unavailable, check(ctx, client).Code())
	got := <-f.ctx
	_, ok := got.Deadline()
	assert.True(t, ok, "the store's context carries the call's deadline")
	assert.Equal(t, []string{"alice"}, metadata.ValueFromIncomingContext(got, "x-api-key"), "and its metadata")
}

func TestShadow(t *testing.T) {
	type report struct {
		method string
		d      keyrate.Decision
		code   codes.Code
	}
	var (
		mu      sync.Mutex
		reports []report // appended by the server's goroutines
	)
	record := func(_ context.Context, method string, d keyrate.Decision, err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, report{method, d, status.Code(err)})
	}
	store, _ := newStore(t, keyrate.Limit{Rate: 1, Per: time.Minute, Burst: 1})
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"), grpclimit.WithShadow(record))
	require.NoError(t, err)
	client := serve(t, in)

	for i := range 3 {
		require.Equal(t, codes.OK, check(withKey("alice"), client).Code(), "call %d: shadow mode never refuses", i+1)
	}
	require.Equal(t, codes.OK, check(context.Background(), client).Code(), "not even a call without a key")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 3, "the two denied calls and the keyless one are reported")
	for _, r := range reports[:2] {
		assert.Equal(t, checkMethod, r.method)
		assert.False(t, r.d.Allowed)
		assert.Equal(t, time.Minute, r.d.RetryAfter)
		assert.Equal(t, codes.OK, r.code, "a denial is reported with a nil err")
	}
	assert.Equal(t, codes.InvalidArgument, reports[2].code)
	assert.Equal(t, 0, store.Peek("alice").Remaining, "denied calls spent nothing; the allowed one spent its token")

	// Shadow mode with no report function, over a failing store.
	in, err = grpclimit.New(&failing{Limiter: store, err: errors.New("down")}, grpclimit.WithShadow(nil))
	require.NoError(t, err)
	assert.Equal(t, codes.OK, check(withKey("alice"), serve(t, in)).Code())
}

func TestTier(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(1), keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(3)}}))
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"), grpclimit.WithTier(func(ctx context.Context, _ string) string {
		if v := metadata.ValueFromIncomingContext(ctx, "x-plan"); len(v) > 0 {
			return v[0]
		}
		return ""
	}))
	require.NoError(t, err)
	client := serve(t, in)
	plan := func(key, plan string) context.Context {
		return metadata.AppendToOutgoingContext(withKey(key), "x-plan", plan)
	}
	for i := range 3 {
		require.Equal(t, codes.OK, check(plan("alice", "pro"), client).Code(), "pro call %d of 3", i+1)
	}
	assert.Equal(t, codes.ResourceExhausted, check(plan("alice", "pro"), client).Code())
	assert.Equal(t, codes.OK, check(plan("bob", "made-up"), client).Code(), "an unknown tier is the default policy")
	assert.Equal(t, codes.ResourceExhausted, check(plan("bob", "made-up"), client).Code(), "whose burst is 1")
}

func TestNewErrors(t *testing.T) {
	store, _ := newStore(t, keyrate.PerMinute(10))
	plain := struct{ keyrate.Limiter }{store} // not a PolicyLimiter
	for _, tc := range []struct {
		name    string
		limiter keyrate.Limiter
		opts    []grpclimit.Option
	}{
		{"nil limiter", nil, nil},
		{"typed nil limiter", (*atomicbucket.Store)(nil), nil},
		{"WithTier without policies", plain, []grpclimit.Option{grpclimit.WithTier(func(context.Context, string) string { return "" })}},
		{"WithTier(nil)", store, []grpclimit.Option{grpclimit.WithTier(nil)}},
		{"ByFunc(nil)", store, []grpclimit.Option{grpclimit.ByFunc(nil)}},
		{"ByMetadata empty", store, []grpclimit.Option{grpclimit.ByMetadata("")}},
		{"ByMetadata binary", store, []grpclimit.Option{grpclimit.ByMetadata("key-bin")}},
		{"ByMetadata binary, upper case", store, []grpclimit.Option{grpclimit.ByMetadata("Key-BIN")}},
		{"WithNoKeyCode(OK)", store, []grpclimit.Option{grpclimit.WithNoKeyCode(codes.OK)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := grpclimit.New(tc.limiter, tc.opts...)
			assert.ErrorIs(t, err, keyrate.ErrInvalidOption)
			assert.Nil(t, in)
		})
	}
}
