package ratelimitsvc_test

import (
	"context"
	"errors"
	"os"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

// FuzzParseConfig: no input panics ParseConfig, and every error is a
// *ConfigError wrapping ErrInvalidConfig.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"basic_config", "wildcard", "config", "example", "bad_yaml", "non_map_list", "unlimited_with_unit"} {
		data, err := os.ReadFile("testdata/envoyproxy/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(apiConfig))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ratelimitsvc.ParseConfig("f.yaml", data)
		var ce *ratelimitsvc.ConfigError
		if err != nil && (!errors.As(err, &ce) || !errors.Is(err, ratelimitsvc.ErrInvalidConfig)) {
			t.Fatalf("%T %v", err, err)
		}
		if err == nil {
			for _, r := range c.Rules() {
				if !r.Unlimited && len(r.Windows) == 0 {
					t.Fatalf("a limited rule without windows: %+v", r)
				}
			}
		}
	})
}

// FuzzShouldRateLimit: no request panics the service; it answers one
// status per descriptor, or an error.
func FuzzShouldRateLimit(f *testing.F) {
	f.Add("api", "user", "alice", "plan", "pro", uint32(1), uint64(0), uint8(0), uint32(0))
	f.Add("api", "plan", "pro", "user", "x", uint32(3), uint64(7), uint8(1), uint32(5))
	f.Add("", "free", "", "", "", uint32(0), uint64(0), uint8(2), uint32(1))
	cfg, err := ratelimitsvc.ParseConfig("api.yaml", []byte(apiConfig))
	if err != nil {
		f.Fatal(err)
	}
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk))
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	svc, err := ratelimitsvc.New(store, cfg, ratelimitsvc.WithClock(clk), ratelimitsvc.WithHeaders(ratelimitsvc.Headers{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string, hits uint32, dhits uint64, flags uint8, override uint32) {
		d := &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: k1, Value: v1}}}
		if flags&1 != 0 {
			d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: k2, Value: v2})
		}
		if flags&2 != 0 {
			d.HitsAddend = wrapperspb.UInt64(dhits)
		}
		d.IsNegativeHits = flags&4 != 0
		if flags&8 != 0 {
			d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: override % 1000, Unit: typev3.RateLimitUnit(flags >> 4 % 8)}
		}
		req := &rlspb.RateLimitRequest{Domain: domain, HitsAddend: hits, Descriptors: []*rlv3.RateLimitDescriptor{d, desc(k2 + "=" + v2)}}
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err == nil && len(resp.Statuses) != 2 {
			t.Fatalf("%d statuses for 2 descriptors", len(resp.Statuses))
		}
		clk.Advance(1)
	})
}
