package ratelimitsvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keyrate/keyrate/ratelimitsvc"
)

// TestMetricsLabels labels decisions by the rule's path, or, under
// detailed_metric and value_to_metric, by the path envoyproxy/ratelimit's
// README gives (its examples 8 and 10). Every rule's own series exist,
// at 0, from the config's load.
func TestMetricsLabels(t *testing.T) {
	r := newRig(t, "m.yaml", `
domain: m
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 1
`)
	r.call(t, "m", desc("key1=unspecified_value"), desc("key1=value1"), desc("route=api", "http_method=GET", "subject_id=123"))
	r.call(t, "m", desc("route=api", "http_method=GET", "subject_id=123"), desc("nope=1"))
	r.call(t, "zzz", desc("key1=x"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.svc.Collector())
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_rls_decisions_total Descriptors decided under a rule, by domain, descriptor (the rule's path) and code (OK or OVER_LIMIT, after shadow mode).
# TYPE keyrate_rls_decisions_total counter
keyrate_rls_decisions_total{code="OK",descriptor="m.key1",domain="m"} 0
keyrate_rls_decisions_total{code="OK",descriptor="m.key1_unspecified_value",domain="m"} 1
keyrate_rls_decisions_total{code="OK",descriptor="m.key1_value1",domain="m"} 1
keyrate_rls_decisions_total{code="OK",descriptor="m.route.http_method.subject_id",domain="m"} 0
keyrate_rls_decisions_total{code="OK",descriptor="m.route_api.http_method_GET.subject_id",domain="m"} 1
keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="m.key1",domain="m"} 0
keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="m.key1_unspecified_value",domain="m"} 0
keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="m.key1_value1",domain="m"} 0
keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="m.route.http_method.subject_id",domain="m"} 0
keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="m.route_api.http_method_GET.subject_id",domain="m"} 1
# HELP keyrate_rls_unmatched_total Descriptors that matched no rule (answered OK), by domain; a domain the config lacks is "(unknown)".
# TYPE keyrate_rls_unmatched_total counter
keyrate_rls_unmatched_total{domain="(unknown)"} 1
keyrate_rls_unmatched_total{domain="m"} 1
`), "keyrate_rls_decisions_total", "keyrate_rls_unmatched_total")
	if err != nil {
		t.Fatal(err)
	}
}

// TestRequestErrorKinds counts a refused request by why it was refused:
// a request beyond a bound is "invalid_request" and an override past
// MaxOverrides is "overrides", never "backend" (the store failing), and
// an embedder calling the Service in process can tell them apart with
// errors.Is, as ErrInvalidRequest and ErrTooManyOverrides promise.
func TestRequestErrorKinds(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	ctx := context.Background()
	_, err := r.svc.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "api"})
	if !errors.Is(err, ratelimitsvc.ErrInvalidRequest) || status.Code(err) != codes.InvalidArgument {
		t.Errorf("no descriptors: %v (code %v), want ErrInvalidRequest, InvalidArgument", err, status.Code(err))
	}
	d := desc("user=a")
	for i := 0; ; i++ {
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(1 + i), Unit: typev3.RateLimitUnit_DAY}
		_, err = r.svc.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{d}})
		if err != nil || i > ratelimitsvc.MaxOverrides {
			break
		}
	}
	if !errors.Is(err, ratelimitsvc.ErrTooManyOverrides) || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("past MaxOverrides: %v (code %v), want ErrTooManyOverrides, ResourceExhausted", err, status.Code(err))
	}
	// Over gRPC too: the client sees the code and the message.
	if _, err := r.try("api", 0, desc("user="+strings.Repeat("x", 600))); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "longer than the 512") {
		t.Errorf("a long key over gRPC: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.svc.Collector())
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_rls_requests_total ShouldRateLimit calls, by overall code (OK, OVER_LIMIT) or error (invalid_request, backend, overrides).
# TYPE keyrate_rls_requests_total counter
keyrate_rls_requests_total{code="OK"} 256
keyrate_rls_requests_total{code="invalid_request"} 2
keyrate_rls_requests_total{code="overrides"} 1
`), "keyrate_rls_requests_total")
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetricsOfRulesGone: a reload drops the series of the rules it
// removed (or renamed), so that reload after reload of a config whose
// rules change names does not grow the metrics without bound; the series
// of a rule kept keep their counts.
func TestMetricsOfRulesGone(t *testing.T) {
	cfg := func(i int) string {
		return userConfig(5, fmt.Sprintf("  - key: tenant\n    value: t%d\n    rate_limit: {unit: minute, requests_per_unit: 3}\n", i))
	}
	r := newRigConfig(t, mustParse(t, cfg(0)))
	r.call(t, "api", desc("user=a"))
	for i := 1; i <= 50; i++ {
		if err := r.svc.Reload(mustParse(t, cfg(i))); err != nil {
			t.Fatal(err)
		}
		r.call(t, "api", desc(fmt.Sprintf("tenant=t%d", i)))
	}
	// Two rules, two codes each.
	if n := testutil.CollectAndCount(r.svc.Collector(), "keyrate_rls_decisions_total"); n != 4 {
		t.Errorf("after 50 reloads renaming a rule, %d series of keyrate_rls_decisions_total, want 4", n)
	}
	for _, name := range []string{"keyrate_rls_hits_total", "keyrate_rls_shadow_mode_total"} {
		if n := testutil.CollectAndCount(r.svc.Collector(), name); n != 2 {
			t.Errorf("after 50 reloads renaming a rule, %d series of %s, want 2", n, name)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.svc.Collector())
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_rls_hits_total Hits asked for (hits_addend, 1 by default) by descriptors decided under a rule, by domain and descriptor.
# TYPE keyrate_rls_hits_total counter
keyrate_rls_hits_total{descriptor="api.tenant_t50",domain="api"} 1
keyrate_rls_hits_total{descriptor="api.user",domain="api"} 1
`), "keyrate_rls_hits_total")
	if err != nil {
		t.Error(err)
	}
}
