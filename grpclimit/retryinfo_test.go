package grpclimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// TestRetryInfoExact: over a real server, a two-window policy and costs of
// 1 to 3, every denial's RetryInfo delay is positive and exact: the same
// call 1ns before it is denied again, and at it allowed. A zero or
// negative delay would send clients into a retry loop; a short one would
// too, a long one would idle them.
func TestRetryInfoExact(t *testing.T) {
	store, clk := newStore(t, keyrate.Limit{Rate: 3, Per: time.Second, Burst: 3},
		keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{
			{Rate: 3, Per: time.Second, Burst: 3},
			{Rate: 10, Per: time.Minute, Burst: 10},
		}}))
	in, err := grpclimit.New(store, grpclimit.ByMetadata("x-api-key"),
		grpclimit.WithCost(func(ctx context.Context, _ string) int {
			n, _ := strconv.Atoi(metadata.ValueFromIncomingContext(ctx, "x-cost")[0])
			return n
		}))
	require.NoError(t, err)
	client := serve(t, in)
	call := func(cost int) codes.Code {
		st := check(metadata.AppendToOutgoingContext(withKey("alice"), "x-cost", strconv.Itoa(cost)), client)
		return st.Code()
	}

	denials := 0
	for i := range 120 {
		cost := 1 + i%3
		ctx := metadata.AppendToOutgoingContext(withKey("alice"), "x-cost", strconv.Itoa(cost))
		st := check(ctx, client)
		switch st.Code() {
		case codes.OK:
			clk.Advance(time.Duration(i%7) * 150 * time.Millisecond)
		case codes.ResourceExhausted:
			denials++
			delay := retryDelay(st)
			require.Greater(t, delay, time.Duration(0), "step %d: cost %d denied with RetryInfo %v", i, cost, delay)
			clk.Advance(delay - 1)
			require.Equal(t, codes.ResourceExhausted, call(cost), "step %d: cost %d, 1ns before the delay %v", i, cost, delay)
			clk.Advance(1)
			require.Equal(t, codes.OK, call(cost), "step %d: cost %d at the delay %v", i, cost, delay)
		default:
			t.Fatalf("step %d: %v", i, st.Err())
		}
	}
	require.Greater(t, denials, 20, "the sequence is mostly denials")
}
