package ratelimitsvc_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
