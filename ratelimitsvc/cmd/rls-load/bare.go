package main

import (
	"context"
	"net"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// bareService answers every ShouldRateLimit OK, one status a descriptor,
// deciding and counting nothing: the gRPC server alone, with none of
// keyrate-rls's code (no config, no matching, no metrics), the yardstick
// for what any rate-limit service over gRPC must cost at least.
type bareService struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (bareService) ShouldRateLimit(_ context.Context, r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	st := make([]*rlspb.RateLimitResponse_DescriptorStatus, len(r.GetDescriptors()))
	for i := range st {
		st[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: st}, nil
}

// serveBare serves bareService and the health service (SERVING) at addr
// until the process is killed: rls-load runs itself with -serve-bare to
// measure it as a process of its own, as the others are.
func serveBare(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(s, bareService{})
	healthpb.RegisterHealthServer(s, health.NewServer())
	return s.Serve(l)
}
