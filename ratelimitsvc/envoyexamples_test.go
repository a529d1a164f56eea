package ratelimitsvc_test

import (
	"math"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/keyrate/keyrate/ratelimitsvc"
)

// route builds the descriptors Envoy sends for one of the routes of
// envoyproxy/ratelimit's examples/envoy/proxy.yaml, from the request's
// headers: each of the route's rate_limits whose request_headers actions
// all find their header becomes one descriptor (Envoy drops a rate_limit
// one of whose headers is missing).
func route(path string, headers map[string]string) []*rlv3.RateLimitDescriptor {
	actions := map[string][][]string{
		"/twoheader":  {{"foo", "bar"}, {"foo", "baz"}},
		"/fourheader": {{"foo", "bar"}, {"source_cluster", "destination_cluster"}},
		"/fiveheader": {{"foo", "bar"}, {"source_cluster", "destination_cluster"}, {"category"}},
	}[path]
	var out []*rlv3.RateLimitDescriptor
next:
	for _, a := range actions {
		var pairs []string
		for _, h := range a {
			v, ok := headers[h]
			if !ok {
				continue next
			}
			pairs = append(pairs, h+"="+v)
		}
		out = append(out, desc(pairs...))
	}
	return out
}

// h builds a header map from "name: value" strings.
func h(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestIntegrationScripts replays envoyproxy/ratelimit's own integration
// tests (integration-test/scripts/replaces.sh, trigger-ratelimit.sh,
// trigger-shadow-mode-key.sh and quota.sh), which send requests through
// Envoy (examples/envoy/proxy.yaml) to the service running
// examples/ratelimit/config/example.yaml, and assert which are limited;
// here the same descriptors go to keyrate over gRPC, within one minute
// (the manual clock stands still until the quota script's wait).
func TestIntegrationScripts(t *testing.T) {
	cfg, err := ratelimitsvc.LoadConfig("testdata/envoyproxy/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := newRigConfig(t, cfg)
	step := 0
	expect := func(path string, headers map[string]string, want rlspb.RateLimitResponse_Code) {
		t.Helper()
		step++
		resp := r.call(t, "rl", route(path, headers)...)
		if resp.OverallCode != want {
			t.Fatalf("step %d: %s %v = %v, want %v (statuses %v)", step, path, headers, resp.OverallCode, want, resp.Statuses)
		}
	}

	// replaces.sh
	expect("/twoheader", h("foo", "bkthomps", "bar", "banned"), over)
	expect("/fourheader", h("foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "mock"), over)
	for _, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		expect("/fourheader", h("foo", "bkthomps", "bar", "banned", "source_cluster", "proxy", "destination_cluster", "override"), want)
	}
	for _, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		expect("/fourheader", h("foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"), want)
	}
	for _, want := range []rlspb.RateLimitResponse_Code{ok, over} {
		expect("/fourheader", h("foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "not_bkthomps"), want)
	}
	expect("/fourheader", h("foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "bkthomps"), over)
	for _, want := range []rlspb.RateLimitResponse_Code{ok, ok, ok, ok, over} {
		expect("/fiveheader", h("foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"), want)
	}
	for _, want := range []rlspb.RateLimitResponse_Code{ok, over} {
		expect("/twoheader", h("foo", "foo_2", "bar", "bkthomps"), want)
	}
	for _, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		expect("/fourheader", h("foo", "foo_3", "bar", "bar_3", "source_cluster", "proxy", "destination_cluster", "fake"), want)
	}
	expect("/fiveheader", h("foo", "my_foo", "bar", "bkthomps", "source_cluster", "proxy", "destination_cluster", "fake", "category", "account"), over)

	// trigger-ratelimit.sh: baz not-so-shady is 3 a minute.
	for _, want := range []rlspb.RateLimitResponse_Code{ok, ok, ok, over, over} {
		expect("/twoheader", h("foo", "pelle", "baz", "not-so-shady"), want)
	}

	// trigger-shadow-mode-key.sh: baz shady is 3 a minute in shadow mode,
	// so never limited, though its status shows it over.
	for i := range 6 {
		resp := r.call(t, "rl", route("/twoheader", h("foo", "pelle", "baz", "shady"))...)
		if resp.OverallCode != ok || resp.Statuses[0].Code != ok {
			t.Fatalf("shadow request %d: %v", i, resp)
		}
		if want := uint32(max(0, 2-i)); resp.Statuses[0].LimitRemaining != want {
			t.Errorf("shadow request %d: limit_remaining %d, want %d", i, resp.Statuses[0].LimitRemaining, want)
		}
	}

	// quota.sh: service_1 (1 a minute) and service_2 (2 a minute) are in
	// quota mode: the request is limited only once both are over.
	quota := []*rlv3.RateLimitDescriptor{desc("service=service_1"), desc("service=service_2")}
	for i, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		resp := r.call(t, "rl", quota...)
		if resp.OverallCode != want {
			t.Fatalf("quota request %d: %v, want %v (%v)", i, resp.OverallCode, want, resp.Statuses)
		}
	}
	r.clock.Advance(time.Minute) // "Waiting 1 minute for quota buckets to be refreshed"
	if resp := r.call(t, "rl", quota...); resp.OverallCode != ok {
		t.Fatalf("quota after a minute: %v", resp)
	}
}

// TestReadmeExamples checks the behaviour envoyproxy/ratelimit's README
// documents for its configuration examples.
func TestReadmeExamples(t *testing.T) {
	t.Run("example2-nested", func(t *testing.T) {
		r := newRig(t, "messaging.yaml", `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`)
		// Each number gets 5 marketing messages a day, and 100 in all.
		for _, n := range []string{"2061111111", "2062222222"} {
			for i := range 7 {
				resp := r.call(t, "messaging", desc("message_type=marketing", "to_number="+n), desc("to_number="+n))
				wantCode, wantLeft := ok, uint32(4-i)
				if i >= 5 {
					wantCode, wantLeft = over, 0
				}
				if resp.OverallCode != wantCode || resp.Statuses[0].LimitRemaining != wantLeft || resp.Statuses[1].LimitRemaining != uint32(99-i) {
					t.Fatalf("%s message %d: %v", n, i, resp)
				}
				if l := resp.Statuses[0].CurrentLimit; l.RequestsPerUnit != 5 || l.Unit != rlspb.RateLimitResponse_RateLimit_DAY {
					t.Fatalf("current_limit %v", l)
				}
			}
		}
		// A marketing message with no number matches no rule.
		if resp := r.call(t, "messaging", desc("message_type=marketing")); resp.Statuses[0].CurrentLimit != nil || resp.OverallCode != ok {
			t.Fatalf("a descriptor no rule ends at: %v", resp)
		}
	})
	t.Run("example3-most-specific", func(t *testing.T) {
		r := newRig(t, "edge.yaml", `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`)
		for i := range 11 {
			resp := r.call(t, "edge_proxy_per_ip", desc("remote_address=50.0.0.1"))
			if want := i < 10; (resp.OverallCode == ok) != want {
				t.Fatalf("request %d from 50.0.0.1: %v", i, resp.OverallCode)
			}
		}
		resp := r.call(t, "edge_proxy_per_ip", desc("remote_address=50.0.0.5"))
		if resp.OverallCode != over || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 {
			t.Fatalf("the blacklisted address: %v", resp)
		}
		if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d != time.Second {
			t.Fatalf("duration_until_reset %v, want 1s", d)
		}
	})
	t.Run("example4-depth", func(t *testing.T) {
		r := newRig(t, "example4.yaml", `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`)
		resp := r.call(t, "example4", desc("key=value", "subkey=subvalue"))
		if resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("a deeper descriptor matched a shallower rule: %v", resp)
		}
	})
	t.Run("example5-unlimited", func(t *testing.T) {
		r := newRig(t, "internal.yaml", `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`)
		for range 200 {
			resp := r.call(t, "internal", desc("ldap=x"))
			if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != math.MaxUint32 {
				t.Fatalf("unlimited: %v", resp)
			}
		}
		if r.store.Len() != 0 {
			t.Fatalf("an unlimited descriptor stored %d keys", r.store.Len())
		}
	})
	t.Run("example7-replaces", func(t *testing.T) {
		r := newRig(t, "example7.yaml", `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`)
		// Both together: 10 a second, the 5 a second untouched.
		for i := range 11 {
			resp := r.call(t, "example7", desc("key_1=value_1", "user=bkthomps"), desc("key_2=value_2", "user=bkthomps"))
			if (resp.OverallCode == ok) != (i < 10) || resp.Statuses[0].CurrentLimit != nil {
				t.Fatalf("request %d: %v", i, resp)
			}
		}
		for i := range 6 {
			resp := r.call(t, "example7", desc("key_1=value_1", "user=bkthomps"))
			if (resp.OverallCode == ok) != (i < 5) {
				t.Fatalf("the replaced limit alone, request %d: %v", i, resp)
			}
		}
	})
	t.Run("example9-wildcards", func(t *testing.T) {
		r := newRig(t, "example9.yaml", `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`)
		for _, c := range []struct {
			d       *rlv3.RateLimitDescriptor
			limited bool
		}{
			{desc("key1=value1"), true}, {desc("key1=valueXYZ"), true}, {desc("key1=valu"), false},
			{desc("path=/api/123/action"), true}, {desc("path=/api/user-id/action"), true}, {desc("path=/api/123/other"), false},
			{desc("route=/api/v1/resource/123/action"), true}, {desc("route=/api/v1/resource/123/other"), false},
		} {
			resp := r.call(t, "example9", c.d)
			if (resp.Statuses[0].CurrentLimit != nil) != c.limited {
				t.Errorf("%v: %v, limited %v", c.d, resp.Statuses[0], c.limited)
			}
		}
		// Without share_threshold each value has its own 20.
		for range 20 {
			r.call(t, "example9", desc("key1=valueA"))
		}
		if resp := r.call(t, "example9", desc("key1=valueB")); resp.OverallCode != ok {
			t.Fatalf("valueB shares valueA's count: %v", resp)
		}
	})
	t.Run("example11-share-threshold", func(t *testing.T) {
		r := newRig(t, "example11.yaml", `
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`)
		for range 5 {
			r.call(t, "example11", desc("files=files/a.pdf"))
			r.call(t, "example11", desc("files=files/b.csv"))
		}
		if resp := r.call(t, "example11", desc("files=files/c.txt")); resp.OverallCode != over {
			t.Fatalf("the shared threshold: %v", resp)
		}
		for range 10 {
			r.call(t, "example11", desc("files_no_share=files_no_share/a.pdf"))
		}
		if resp := r.call(t, "example11", desc("files_no_share=files_no_share/b.csv")); resp.OverallCode != ok {
			t.Fatalf("isolated thresholds: %v", resp)
		}
	})
}
