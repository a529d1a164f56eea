// Package rlsproc runs rate-limit services as processes of their own for
// the tests and the load generator of this module: envoyproxy/ratelimit's
// environment, free loopback ports, and the wait until a server's gRPC
// health service answers SERVING.
package rlsproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// FreePort returns a loopback port that was free when asked.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// EnvoyEnv returns the environment that makes envoyproxy/ratelimit's
// service_cmd serve gRPC on 127.0.0.1:grpcPort (its HTTP and debug
// servers on free loopback ports), read its config from
// root/ratelimit/config without watching it, count in the Redis at
// redisAddr, and keep its stats and logs quiet (without a statsd, its
// stats would go to a debug log).
func EnvoyEnv(root, redisAddr string, grpcPort int) ([]string, error) {
	http, err := FreePort()
	if err != nil {
		return nil, err
	}
	debug, err := FreePort()
	if err != nil {
		return nil, err
	}
	return []string{
		"USE_STATSD=false", "DISABLE_STATS=true", "LOG_LEVEL=warn",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", fmt.Sprintf("PORT=%d", http),
		"GRPC_HOST=127.0.0.1", fmt.Sprintf("GRPC_PORT=%d", grpcPort),
		"DEBUG_HOST=127.0.0.1", fmt.Sprintf("DEBUG_PORT=%d", debug),
	}, nil
}

// ErrExited reports a server process that exited before it served.
var ErrExited = errors.New("the server exited before it served")

// WaitServing polls the gRPC health service at addr until it answers
// SERVING (a process starting: nothing to wait on but polling), for up to
// limit, or until exited is closed (ErrExited).
func WaitServing(addr string, limit time.Duration, exited <-chan struct{}) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not serving within %v: %v", addr, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
