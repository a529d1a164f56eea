package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/inflight"
)

// userAndOrg keys a call by its x-user and x-org metadata, under the
// tiers user and org.
func userAndOrg(user, org keyrate.Tier) grpclimit.KeysFunc {
	return func(ctx context.Context, _ string, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if len(md["x-user"]) == 0 || len(md["x-org"]) == 0 {
			return keys, nil // no key: the call is refused
		}
		return append(keys,
			keyrate.KeyCost{Key: "user:" + md["x-user"][0], Tier: user},
			keyrate.KeyCost{Key: "org:" + md["x-org"][0], Tier: org}), nil
	}
}

// ExampleByKeys limits each call on its user and its organisation at
// once: a user 2 a minute, an organisation 3. A call its user's limit
// denies is not charged to the organisation, so bob still gets its
// share; the observer says which key denied.
func ExampleByKeys() {
	limiter, err := atomicbucket.New(keyrate.PerMinute(100), keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(3)}},
	))
	if err != nil {
		panic(err)
	}
	user, _ := limiter.Tier("user")
	org, _ := limiter.Tier("org")
	rl, err := grpclimit.New(limiter, grpclimit.ByKeys(userAndOrg(user, org)),
		grpclimit.WithObserver(keyrate.ObserverFunc(func(e keyrate.Event) {
			if !e.Allowed {
				fmt.Printf("  denied by %s (%s)\n", e.Key, e.Policy)
			}
		})))
	if err != nil {
		panic(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/shop.Cart/Add"}
	ok := func(context.Context, any) (any, error) { return "done", nil }
	for _, who := range []string{"alice", "alice", "alice", "bob", "bob"} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-user", who, "x-org", "acme"))
		_, err := rl.Unary(ctx, nil, info, ok)
		fmt.Println(who, status.Code(err))
	}
	// Output:
	// alice OK
	// alice OK
	//   denied by user:alice (user)
	// alice ResourceExhausted
	// bob OK
	//   denied by org:acme (org)
	// bob ResourceExhausted
}

// TestByKeys: a call the organisation denies is not charged to its user;
// a call without keys ends with the no-key code, a key list AllowAll
// rejects with codes.Internal, neither charging anything; New refuses a
// nil function and a limiter that is not a keyrate.PolicyLimiter.
func TestByKeys(t *testing.T) {
	lim, err := atomicbucket.New(keyrate.PerHour(100), keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerHour(5)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerHour(1)}},
	))
	if err != nil {
		t.Fatal(err)
	}
	user, _ := lim.Tier("user")
	org, _ := lim.Tier("org")
	rl, err := grpclimit.New(lim, grpclimit.ByKeys(userAndOrg(user, org)))
	if err != nil {
		t.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/m"}
	ok := func(context.Context, any) (any, error) { return nil, nil }
	call := func(pairs ...string) codes.Code {
		_, err := rl.Unary(metadata.NewIncomingContext(context.Background(), metadata.Pairs(pairs...)), nil, info, ok)
		return status.Code(err)
	}
	for i, c := range []struct {
		user string
		want codes.Code
	}{{"alice", codes.OK}, {"bob", codes.ResourceExhausted}, {"carol", codes.ResourceExhausted}} {
		if got := call("x-user", c.user, "x-org", "acme"); got != c.want {
			t.Fatalf("call %d (%s): %v, want %v", i, c.user, got, c.want)
		}
	}
	for _, who := range []string{"bob", "carol"} {
		if d, _ := lim.PeekTier("user:"+who, user); d.Remaining != 5 {
			t.Fatalf("%s, denied by the organisation, was charged: %+v", who, d)
		}
	}
	if got := call("x-user", "dave"); got != codes.InvalidArgument {
		t.Fatalf("a call without keys: %v, want InvalidArgument", got)
	}
	twice, err := grpclimit.New(lim, grpclimit.ByKeys(func(_ context.Context, _ string, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
		return append(keys, keyrate.KeyCost{Key: "user:erin", Tier: user}, keyrate.KeyCost{Key: "user:erin", Tier: org}), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := twice.Unary(context.Background(), nil, info, ok); status.Code(err) != codes.Internal {
		t.Fatalf("a key twice: %v, want Internal", err)
	}
	if d, _ := lim.PeekTier("user:erin", user); d.Remaining != 5 {
		t.Fatalf("a refused key list charged its key: %+v", d)
	}
	if _, err := grpclimit.New(lim, grpclimit.ByKeys(nil)); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Errorf("ByKeys(nil): New = %v, want ErrInvalidOption", err)
	}
	if _, err := grpclimit.New(plain{lim}, grpclimit.ByKeys(userAndOrg(user, org))); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Errorf("ByKeys on a plain Limiter: New = %v, want ErrInvalidOption", err)
	}
}

// plain is a keyrate.Limiter that is not a PolicyLimiter.
type plain struct{ keyrate.Limiter }

// TestByKeysRefusesInflight checks that New refuses ByKeys beside
// WithInflight, which the interceptor would otherwise skip (ByKeys
// decides before the cap is taken): a cap given and silently not
// enforced.
func TestByKeysRefusesInflight(t *testing.T) {
	store, err := atomicbucket.New(keyrate.Limit{Rate: 10, Per: time.Second, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	slots, err := inflight.New(2)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(_ context.Context, _ string, k []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
		return append(k, keyrate.KeyCost{Key: "u"}), nil
	}
	_, err = grpclimit.New(store, grpclimit.ByKeys(keys), grpclimit.WithInflight(slots))
	if !errors.Is(err, keyrate.ErrInvalidOption) || !strings.Contains(err.Error(), "WithInflight") {
		t.Fatalf("New(ByKeys, WithInflight) = %v, want an error wrapping keyrate.ErrInvalidOption naming WithInflight", err)
	}
}
