package ratelimitsvc_test

import (
	"context"
	"fmt"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

// A config in envoyproxy/ratelimit's format, decided by an in-process
// store (on a manual clock, so that the output is the same every run).
func Example() {
	cfg, err := ratelimitsvc.ParseConfig("messaging.yaml", []byte(`
domain: messaging
descriptors:
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 2
`))
	if err != nil {
		panic(err)
	}
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	svc, err := ratelimitsvc.New(store, cfg, ratelimitsvc.WithClock(clk))
	if err != nil {
		panic(err)
	}
	req := &rlspb.RateLimitRequest{Domain: "messaging", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "to_number", Value: "2061111111"}}},
	}}
	for range 3 {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, st.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 24h0m0s
	// OK 0 24h0m0s
	// OVER_LIMIT 0 24h0m0s
}
