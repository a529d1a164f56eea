package grpclimit_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/inflight"
)

// WithInflight caps the calls a key has running at once; with a nil
// limiter, the cap alone. Here alice already holds her one slot (as a
// long call of hers would), so her next call ends with ResourceExhausted
// naming concurrency; once the slot is back, it is served.
func ExampleWithInflight() {
	caps, err := inflight.New(1)
	if err != nil {
		panic(err)
	}
	in, err := grpclimit.New(nil, grpclimit.ByFunc(func(context.Context, string) (string, error) { return "alice", nil }),
		grpclimit.WithInflight(caps))
	if err != nil {
		panic(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/pkg.Service/Method"}
	handler := func(context.Context, any) (any, error) { return "ok", nil }
	call := func() {
		resp, err := in.Unary(context.Background(), nil, info, handler)
		if err != nil {
			st := status.Convert(err)
			fmt.Println(st.Code(), st.Message())
			return
		}
		fmt.Println(resp)
	}
	long, _ := caps.TryAcquire("alice")
	call()
	long.Release()
	call()
	// Output:
	// ResourceExhausted grpclimit: too many calls in flight for /pkg.Service/Method (limit 1)
	// ok
}
