package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/grpclimit"
)

// onlyLimiter is a keyrate.Limiter that is not a PolicyLimiter.
type onlyLimiter struct{ keyrate.Limiter }

// New: "an error wrapping keyrate.ErrInvalidOption if limiter is nil or
// holds a nil pointer of a limiter type ...; if WithTier is given with a
// limiter that is not a keyrate.PolicyLimiter; or if an option is
// invalid": ByFunc(nil), a ByMetadata name that is not a text metadata key,
// WithNoKeyCode(codes.OK), WithTier(nil), a typed nil observer.
func TestMisuseNewRefuses(t *testing.T) {
	store, _ := newStore(t, keyrate.PerSecond(1))
	var nilStore *atomicbucket.Store
	var nilObs keyrate.ObserverFunc
	tier := func(context.Context, string) string { return "" }
	for _, c := range []struct {
		name    string
		limiter keyrate.Limiter
		opts    []grpclimit.Option
	}{
		{"nil limiter", nil, nil},
		{"typed nil limiter", nilStore, nil},
		{"ByFunc(nil)", store, []grpclimit.Option{grpclimit.ByFunc(nil)}},
		{"ByMetadata(empty)", store, []grpclimit.Option{grpclimit.ByMetadata("")}},
		{"ByMetadata(space)", store, []grpclimit.Option{grpclimit.ByMetadata("x key")}},
		{"ByMetadata(-bin)", store, []grpclimit.Option{grpclimit.ByMetadata("x-key-bin")}},
		{"WithNoKeyCode(OK)", store, []grpclimit.Option{grpclimit.WithNoKeyCode(codes.OK)}},
		{"WithTier(nil)", store, []grpclimit.Option{grpclimit.WithTier(nil)}},
		{"WithTier without PolicyLimiter", onlyLimiter{store}, []grpclimit.Option{grpclimit.WithTier(tier)}},
		{"typed nil observer", store, []grpclimit.Option{grpclimit.WithObserver(nilObs)}},
	} {
		in, err := grpclimit.New(c.limiter, c.opts...)
		if !errors.Is(err, keyrate.ErrInvalidOption) || in != nil {
			t.Errorf("New(%s) = %v, %v; want nil and ErrInvalidOption", c.name, in, err)
		}
	}
	if _, err := grpclimit.New(store, nil, grpclimit.WithCost(nil), grpclimit.WithObserver(nil), grpclimit.WithShadow(nil)); err != nil {
		t.Errorf("New with a nil option, WithCost(nil), WithObserver(nil) and WithShadow(nil) = %v, want the defaults", err)
	}
}

// An Interceptor not made by New (the zero value, or a nil pointer), put in
// a server's chain, must not take the server down: a panic in an
// interceptor is not recovered by grpc-go and ends the process. Like the
// interceptors called without gRPC's arguments, it ends the call with
// codes.Internal and calls no handler.
func TestMisuseInterceptorNotFromNew(t *testing.T) {
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/M"}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/svc/S"}
	for name, in := range map[string]*grpclimit.Interceptor{"zero": {}, "nil": nil} {
		called := false
		var uerr, serr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					uerr = fmt.Errorf("panic: %v", r)
				}
			}()
			_, uerr = in.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) { called = true; return nil, nil })
		}()
		func() {
			defer func() {
				if r := recover(); r != nil {
					serr = fmt.Errorf("panic: %v", r)
				}
			}()
			serr = in.Stream(nil, fakeStream{}, sinfo, func(any, grpc.ServerStream) error { called = true; return nil })
		}()
		if status.Code(uerr) != codes.Internal || status.Code(serr) != codes.Internal || called {
			t.Errorf("%s Interceptor: Unary = %v, Stream = %v, handler called %v; want codes.Internal and no handler", name, uerr, serr, called)
		}
	}
}

// fakeStream is a grpc.ServerStream with a context.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }
