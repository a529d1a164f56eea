package ratelimitsvc_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

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
	f.Add([]byte("domain: d\ndescriptors: &x [{key: a, descriptors: *x}]\n"))
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

// modelConfig is FuzzAdmissionModel's config: fixed windows of a second
// and a minute, a more specific value, a shared wildcard and a shadow
// rule.
const modelConfig = `
domain: f
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    value: vip
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: files
    value: f*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
`

// modelDescriptor is one descriptor FuzzAdmissionModel sends, and what
// the model knows of it: the count it is kept in (share_threshold puts
// both files in one), its rule's limit and window, and shadow mode.
type modelDescriptor struct {
	entry  string
	count  string // "" for a descriptor no rule matches
	limit  int
	unit   time.Duration
	shadow bool
}

var modelDescriptors = []modelDescriptor{
	{"user=a", "user=a", 5, time.Minute, false},
	{"user=b", "user=b", 5, time.Minute, false},
	{"user=vip", "user=vip", 3, time.Second, false},
	{"files=f1", "files=f*", 4, time.Minute, false},
	{"files=f2", "files=f*", 4, time.Minute, false},
	{"shadow=s", "shadow=s", 2, time.Second, true},
	{"nope=x", "", 0, 0, false},
}

// FuzzAdmissionModel drives the service with a sequence of requests and
// clock steps read from the input, and checks each status against a
// model of envoyproxy/ratelimit's fixed windows as this package decides
// them (all or nothing, a denial spends nothing, a check asks for one
// more, a negative hit refunds up to the limit): the code, and what
// remains. So no sequence admits more in a window than its limit, and
// every answer says what the window holds. Each pair of bytes is one
// step: a clock step of up to 3.1s, or a request of one or two
// descriptors, each of 0 to 6 hits, refunded or spent.
func FuzzAdmissionModel(f *testing.F) {
	f.Add([]byte{0, 3, 0, 3, 0, 4, 7, 80, 0, 1})
	f.Add([]byte{3, 2, 4, 2, 3, 0, 2, 1, 2, 1, 2, 1, 2, 1, 7, 8, 2, 1})
	f.Add([]byte{5, 1, 5, 1, 5, 1, 5, 0, 0, 0x86, 0, 5, 0, 0x43, 0x0b, 0x41})
	cfg, err := ratelimitsvc.ParseConfig("model.yaml", []byte(modelConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := clock.NewManual(0)
		store, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		svc, err := ratelimitsvc.New(store, cfg, ratelimitsvc.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		type window struct {
			count string
			n     time.Duration
		}
		spent := map[window]int{}
		for i := 0; i+1 < len(ops); i += 2 {
			x, y := ops[i], ops[i+1]
			if x%8 == 7 {
				clk.Advance(time.Duration(y%32) * 100 * time.Millisecond)
				continue
			}
			ms := []modelDescriptor{modelDescriptors[x%8%7]}
			if y&0x40 != 0 {
				ms = append(ms, modelDescriptors[(x>>3)%7])
			}
			hits, negative := uint64(y%7), y&0x80 != 0
			req := &rlspb.RateLimitRequest{Domain: "f"}
			for _, m := range ms {
				d := desc(m.entry)
				d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(hits), negative
				req.Descriptors = append(req.Descriptors, d)
			}
			resp, err := svc.ShouldRateLimit(context.Background(), req)
			if err != nil {
				t.Fatalf("step %d: %v", i/2, err)
			}
			for j, m := range ms {
				st := resp.Statuses[j]
				if m.count == "" {
					if st.Code != ok || st.CurrentLimit != nil {
						t.Fatalf("step %d: %s matches no rule: %v", i/2, m.entry, st)
					}
					continue
				}
				w := window{m.count, clk.Now() / m.unit}
				n, h := spent[w], int(hits)
				var fits bool
				switch {
				case negative:
					spent[w], fits = max(0, n-min(h, m.limit)), true
				case h == 0:
					fits = n+1 <= m.limit
				default:
					if fits = n+h <= m.limit; fits {
						spent[w] = n + h
					}
				}
				code, left := over, uint32(0)
				if fits || m.shadow {
					code = ok
				}
				if fits && !negative {
					left = uint32(m.limit - spent[w])
				}
				if st.Code != code || (!negative && st.LimitRemaining != left) {
					t.Fatalf("step %d at %v: %s, %d hits (negative %v), %d of %d spent before: %v remaining %d, want %v remaining %d",
						i/2, clk.Now(), m.entry, h, negative, n, m.limit, st.Code, st.LimitRemaining, code, left)
				}
			}
		}
	})
}
