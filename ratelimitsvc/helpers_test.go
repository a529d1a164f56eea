package ratelimitsvc_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

// rig is a Service behind a real gRPC server on loopback, an in-process
// store on a manual clock (at 0, the start of every window), and the
// generated Envoy client.
type rig struct {
	svc    *ratelimitsvc.Service
	store  *atomicbucket.Store
	clock  *clock.Manual
	client rlspb.RateLimitServiceClient
}

// newRig serves cfg, read from a file named name.
func newRig(t *testing.T, name, cfg string, opts ...ratelimitsvc.Option) *rig {
	t.Helper()
	c, err := ratelimitsvc.ParseConfig(name, []byte(cfg))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return newRigConfig(t, c, opts...)
}

func newRigConfig(t *testing.T, c *ratelimitsvc.Config, opts ...ratelimitsvc.Option) *rig {
	t.Helper()
	return newRigStore(t, c, nil, nil, opts...)
}

// newRigStore is newRigConfig with the store's options, and wrap, if not
// nil, putting a store of the test's around it for the Service.
func newRigStore(t *testing.T, c *ratelimitsvc.Config, storeOpts []keyrate.Option, wrap func(*atomicbucket.Store) keyrate.PolicyLimiter, opts ...ratelimitsvc.Option) *rig {
	t.Helper()
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerSecond(1), append(storeOpts, keyrate.WithClock(clk))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var s keyrate.PolicyLimiter = store
	if wrap != nil {
		s = wrap(store)
	}
	svc, err := ratelimitsvc.New(s, c, append([]ratelimitsvc.Option{ratelimitsvc.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &rig{svc: svc, store: store, clock: clk, client: serve(t, svc)}
}

// serve runs svc on a gRPC server on loopback until the test ends and
// returns a client of it.
func serve(t *testing.T, svc *ratelimitsvc.Service) rlspb.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	svc.Register(srv)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.GracefulStop()
		<-done
	})
	return rlspb.NewRateLimitServiceClient(conn)
}

// desc builds a descriptor from "key=value" pairs.
func desc(pairs ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// call sends one request and fails the test on an error.
func (r *rig) call(t *testing.T, domain string, descs ...*rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	resp, err := r.try(domain, 0, descs...)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%s, %v): %v", domain, descs, err)
	}
	return resp
}

func (r *rig) try(domain string, hits uint32, descs ...*rlv3.RateLimitDescriptor) (*rlspb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: domain, Descriptors: descs, HitsAddend: hits})
}

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	ok   = rlspb.RateLimitResponse_OK
	over = rlspb.RateLimitResponse_OVER_LIMIT
)

// hookStore is an in-process store that runs a test's hook at a point of
// interest inside the Service's calls, so that an interleaving happens
// on every run: after each SetPolicy (inside Reload), after a PeekTier,
// and before an AllowTier. A hook runs once; nil is none.
type hookStore struct {
	*atomicbucket.Store
	afterSetPolicy func(keyrate.Policy)
	afterPeek      func()
	beforeAllow    func()
}

func (h *hookStore) AllowTier(key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	if f := h.beforeAllow; f != nil {
		h.beforeAllow = nil
		f()
	}
	return h.Store.AllowTier(key, tier, cost)
}

func (h *hookStore) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	d, err := h.Store.PeekTier(key, tier)
	if f := h.afterPeek; f != nil {
		h.afterPeek = nil
		f()
	}
	return d, err
}

func (h *hookStore) SetPolicy(p keyrate.Policy) error {
	err := h.Store.SetPolicy(p)
	if f := h.afterSetPolicy; f != nil && err == nil {
		h.afterSetPolicy = nil
		f(p)
	}
	return err
}

// newHookRig serves cfg from a hookStore on a manual clock at 0.
func newHookRig(t *testing.T, cfg string, opts ...ratelimitsvc.Option) (*rig, *hookStore) {
	t.Helper()
	c, err := ratelimitsvc.ParseConfig("api.yaml", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	h := &hookStore{}
	r := newRigStore(t, c, nil, func(s *atomicbucket.Store) keyrate.PolicyLimiter { h.Store = s; return h }, opts...)
	return r, h
}
