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
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/grpclimit"
	"github.com/keyrate/keyrate/mutexbucket"
)

// TestRetryInfoExact: over a real server, a two-window policy under each
// algorithm (the sliding log, which must be its policy's only window, with
// one) and costs of 1 to 3, every denial's RetryInfo delay is positive and
// exact: the same call 1ns before it is denied again, and at it allowed. A
// zero or negative delay would send clients into a retry loop; a short
// one would too, a long one would idle them.
func TestRetryInfoExact(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog} {
		t.Run("alg="+alg.String(), func(t *testing.T) {
			limits := []keyrate.Limit{
				keyrate.Limit{Rate: 3, Per: time.Second, Burst: 3}.Using(alg),
				keyrate.Limit{Rate: 10, Per: time.Minute, Burst: 10}.Using(alg),
			}
			if alg == keyrate.SlidingLog {
				limits = limits[:1]
			}
			retryInfoExact(t, limits)
		})
	}
}

// retryInfoExact is TestRetryInfoExact under limits, with mutexbucket,
// which carries every algorithm.
func retryInfoExact(t *testing.T, limits []keyrate.Limit) {
	clk := clock.NewManual(0)
	store, err := mutexbucket.New(limits[0], keyrate.WithClock(clk),
		keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: limits}))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
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
