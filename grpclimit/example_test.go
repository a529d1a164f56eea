package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/grpclimit"
)

// A gRPC server that allows each API key 2 calls a minute: the third call
// ends with ResourceExhausted and a RetryInfo saying when to retry.
func Example() {
	limiter, err := atomicbucket.New(keyrate.PerMinute(2))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	rl, err := grpclimit.New(limiter, grpclimit.ByMetadata("x-api-key"))
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(rl.Unary), grpc.ChainStreamInterceptor(rl.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice")
	for range 3 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				// About 30s, since a token comes every 30s; rounded for the output.
				fmt.Printf(", retry in %v", ri.GetRetryDelay().AsDuration().Round(10*time.Second))
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted, retry in 30s
}
