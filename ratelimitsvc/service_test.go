package ratelimitsvc_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/ratelimitsvc"
)

const apiConfig = `
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: plan
    value: pro
    descriptors:
      - key: user
        rate_limit:
          unit: second
          requests_per_unit: 10
          algorithm: token-bucket
          burst: 4
          windows:
            - unit: minute
              requests_per_unit: 6
  - key: free
    rate_limit:
      unlimited: true
`

// TestUnknown answers descriptors no rule matches as envoyproxy/ratelimit
// does: OK, with no current_limit and nothing remaining, whatever the
// domain.
func TestUnknown(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	for _, c := range []struct {
		domain string
		d      *rlv3.RateLimitDescriptor
	}{
		{"nope", desc("user=alice")},
		{"api", desc("tenant=x")},
		{"api", desc("user=alice", "extra=1")},
		{"api", desc()},
		{"nope", &rlv3.RateLimitDescriptor{Entries: desc("user=a").Entries, Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_SECOND}}},
	} {
		for range 3 {
			resp := r.call(t, c.domain, c.d)
			st := resp.Statuses[0]
			if resp.OverallCode != ok || st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 || st.DurationUntilReset != nil {
				t.Fatalf("%s %v: %v", c.domain, c.d, resp)
			}
		}
	}
	if n := r.store.Len(); n != 0 {
		t.Fatalf("%d keys stored for unmatched descriptors", n)
	}
}

// TestRequestBounds refuses, with InvalidArgument and a message naming
// the value and the bound, what the service will not decide.
func TestRequestBounds(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig, ratelimitsvc.WithLimits(3, 2, 40))
	many := []*rlv3.RateLimitDescriptor{desc("user=a"), desc("user=b"), desc("user=c"), desc("user=d")}
	for _, c := range []struct {
		domain string
		descs  []*rlv3.RateLimitDescriptor
		want   string
	}{
		{"", []*rlv3.RateLimitDescriptor{desc("user=a")}, "rate limit domain must not be empty"},
		{"api", nil, "rate limit descriptor list must not be empty"},
		{"api", many, "4 descriptors, more than the 3 a request may hold"},
		{"api", []*rlv3.RateLimitDescriptor{desc("a=1", "b=2", "c=3")}, "descriptor 0 has 3 entries, more than the 2 a descriptor may hold"},
		{"api", []*rlv3.RateLimitDescriptor{desc("user=a"), desc("user=" + strings.Repeat("x", 40))}, "descriptor 1's key (its domain, keys and values) is 49 bytes, longer than the 40 a key may be"},
	} {
		_, err := r.try(c.domain, 0, c.descs...)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %v: %v, want InvalidArgument holding %q", c.domain, len(c.descs), err, c.want)
		}
	}
	// Nothing was spent by the refused requests.
	if resp := r.call(t, "api", desc("user=a")); resp.Statuses[0].LimitRemaining != 9 {
		t.Fatalf("a refused request spent: %v", resp)
	}
}

// TestHitsAddend spends a request's hits_addend, or a descriptor's own;
// 0 only checks; more than the limit holds is over it without spending.
func TestHitsAddend(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	resp, err := r.try("api", 3, desc("user=a"), desc("user=b"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Statuses[0].LimitRemaining != 7 || resp.Statuses[1].LimitRemaining != 7 {
		t.Fatalf("request hits_addend 3: %v", resp)
	}
	d := desc("user=a")
	d.HitsAddend = wrapperspb.UInt64(5)
	if resp, _ = r.try("api", 3, d); resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("descriptor hits_addend 5: %v", resp)
	}
	d.HitsAddend = wrapperspb.UInt64(0)
	for range 3 {
		if resp, _ = r.try("api", 0, d); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 2 {
			t.Fatalf("a check (hits_addend 0) spent: %v", resp)
		}
	}
	d.HitsAddend = wrapperspb.UInt64(11)
	if resp, _ = r.try("api", 0, d); resp.OverallCode != over || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("hits_addend 11 of a limit of 10: %v", resp)
	}
	d.HitsAddend = wrapperspb.UInt64(3)
	if resp, _ = r.try("api", 0, d); resp.OverallCode != over {
		t.Fatalf("hits_addend 3 with 2 left: %v", resp)
	}
	// All or nothing: the denied 3 spent nothing, so 2 still fit.
	d.HitsAddend = wrapperspb.UInt64(2)
	if resp, _ = r.try("api", 0, d); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("hits_addend 2 with 2 left: %v", resp)
	}
	d.HitsAddend = wrapperspb.UInt64(0)
	if resp, _ = r.try("api", 0, d); resp.OverallCode != over {
		t.Fatalf("a check of a full window: %v", resp)
	}
	// is_negative_hits gives hits back.
	d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(4), true
	if resp, _ = r.try("api", 0, d); resp.OverallCode != ok {
		t.Fatalf("a refund: %v", resp)
	}
	if resp = r.call(t, "api", desc("user=a")); resp.Statuses[0].LimitRemaining != 3 {
		t.Fatalf("after a refund of 4: %v", resp)
	}
}

// TestStatus fills each descriptor's status from keyrate's decision: the
// window that decided, what it has left, and when it resets.
func TestStatus(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	r.clock.Set(10*time.Second + 300*time.Millisecond)
	resp := r.call(t, "api", desc("user=alice"))
	st := resp.Statuses[0]
	if st.CurrentLimit.GetRequestsPerUnit() != 10 || st.CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_MINUTE || st.LimitRemaining != 9 {
		t.Fatalf("status %v", st)
	}
	if d := st.DurationUntilReset.AsDuration(); d != 49700*time.Millisecond {
		t.Fatalf("duration_until_reset %v, want 49.7s (the minute ends at 60s)", d)
	}
	// plan pro: a token bucket of 10 a second, bursts of 4, and at most 6
	// a minute; the status names the window with the least left.
	pro := desc("plan=pro", "user=bob")
	var lefts []uint32
	var units []rlspb.RateLimitResponse_RateLimit_Unit
	for range 5 {
		st := r.call(t, "api", pro).Statuses[0]
		lefts = append(lefts, st.LimitRemaining)
		units = append(units, st.CurrentLimit.GetUnit())
	}
	if got := lefts; got[0] != 3 || got[3] != 0 || got[4] != 0 || units[0] != rlspb.RateLimitResponse_RateLimit_SECOND {
		t.Fatalf("a burst of 4: remaining %v, units %v", lefts, units)
	}
	r.clock.Advance(time.Second) // the bucket refills; the minute has 2 left
	for i, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		resp := r.call(t, "api", pro)
		if resp.OverallCode != want {
			t.Fatalf("after a second, request %d: %v", i, resp)
		}
		if want == over && resp.Statuses[0].CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("denied by the minute, but reported %v", resp.Statuses[0].CurrentLimit)
		}
	}
}

// TestHeaders adds the limit, remaining and reset of the descriptor
// closest to its limit, or of one over it.
func TestHeaders(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig, ratelimitsvc.WithHeaders(ratelimitsvc.Headers{Reset: "RateLimit-Reset"}))
	r.clock.Set(30 * time.Second)
	for range 8 {
		r.call(t, "api", desc("user=a"))
	}
	resp := r.call(t, "api", desc("user=b"), desc("user=a"), desc("free=x"))
	want := []*corev3.HeaderValue{
		{Key: "X-RateLimit-Limit", Value: "10"}, {Key: "X-RateLimit-Remaining", Value: "1"}, {Key: "RateLimit-Reset", Value: "30"},
	}
	if !headersEqual(resp.ResponseHeadersToAdd, want) {
		t.Fatalf("headers %v, want %v", resp.ResponseHeadersToAdd, want)
	}
	r.call(t, "api", desc("user=a"))
	resp = r.call(t, "api", desc("user=a"), desc("user=b"))
	if resp.OverallCode != over || resp.ResponseHeadersToAdd[1].Value != "0" {
		t.Fatalf("over the limit: %v", resp)
	}
	if resp := newRig(t, "api.yaml", apiConfig).call(t, "api", desc("user=a")); len(resp.ResponseHeadersToAdd) != 0 {
		t.Fatalf("headers without WithHeaders: %v", resp.ResponseHeadersToAdd)
	}
}

func headersEqual(a, b []*corev3.HeaderValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// TestGlobalShadowMode answers OK whatever the descriptors say.
func TestGlobalShadowMode(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig, ratelimitsvc.WithShadowMode())
	for i := range 12 {
		resp := r.call(t, "api", desc("user=a"))
		if resp.OverallCode != ok || (i >= 10) != (resp.Statuses[0].Code == over) {
			t.Fatalf("request %d: %v", i, resp)
		}
	}
}

// TestLimitOverride decides a descriptor carrying a limit override under
// that limit, a fixed window, with a policy per distinct override.
func TestLimitOverride(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	d := desc("user=carol")
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
	for i, want := range []rlspb.RateLimitResponse_Code{ok, ok, over} {
		resp := r.call(t, "api", d)
		if resp.OverallCode != want || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("override request %d: %v", i, resp)
		}
	}
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typev3.RateLimitUnit_HOUR}
	if resp := r.call(t, "api", d); resp.OverallCode != over {
		t.Fatalf("an override of 0: %v", resp)
	}
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2}
	if _, err := r.try("api", 0, d); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an override of unknown unit: %v", err)
	}
	for i := range ratelimitsvc.MaxOverrides {
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(100 + i), Unit: typev3.RateLimitUnit_DAY}
		if _, err := r.try("api", 0, d); err != nil {
			if status.Code(err) != codes.ResourceExhausted || i < ratelimitsvc.MaxOverrides-2 {
				t.Fatalf("override %d: %v", i, err)
			}
			return
		}
	}
	t.Fatalf("more than %d overrides made policies", ratelimitsvc.MaxOverrides)
}

// TestNewErrors: New refuses a nil store or config and bad options.
func TestNewErrors(t *testing.T) {
	cfg, err := ratelimitsvc.ParseConfig("api.yaml", []byte(apiConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, "api.yaml", apiConfig)
	for _, c := range []struct {
		store keyrate.PolicyLimiter
		cfg   *ratelimitsvc.Config
		opt   ratelimitsvc.Option
	}{
		{nil, cfg, nil}, {r.store, nil, nil}, {r.store, cfg, ratelimitsvc.WithClock(nil)}, {r.store, cfg, ratelimitsvc.WithLimits(0, 1, 1)},
	} {
		if _, err := ratelimitsvc.New(c.store, c.cfg, c.opt); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("New: %v, want ErrInvalidOption", err)
		}
	}
}

// TestOverLimitRemainingZero: a descriptor over its limit reports
// limit_remaining 0, as envoyproxy/ratelimit does, however many hits it
// asked for and whatever the window holds (all or nothing, so a smaller
// request may still fit: limit_remaining is not that), and so do the
// headers of the response.
func TestOverLimitRemainingZero(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig, ratelimitsvc.WithHeaders(ratelimitsvc.Headers{}))
	for _, c := range []struct {
		d    *rlv3.RateLimitDescriptor
		hits uint64
		code rlspb.RateLimitResponse_Code
		left uint32
	}{
		{desc("user=a"), 8, ok, 2},
		{desc("user=a"), 5, over, 0},  // 2 left: the store refuses 5
		{desc("user=a"), 11, over, 0}, // more than the limit holds
		{desc("plan=pro", "user=b"), 3, ok, 1},
		{desc("plan=pro", "user=b"), 3, over, 0}, // 1 left of the burst of 4
	} {
		c.d.HitsAddend = wrapperspb.UInt64(c.hits)
		resp, err := r.try("api", 0, c.d)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Statuses[0]
		if st.Code != c.code || st.LimitRemaining != c.left || resp.ResponseHeadersToAdd[1].Value != strconv.Itoa(int(c.left)) {
			t.Fatalf("%v, %d hits: %v, want %v with %d remaining", c.d.Entries, c.hits, resp, c.code, c.left)
		}
	}
}

// TestStoreFullIsOverLimit: a store at its WithMaxKeys cap refuses a new
// key (keyrate.ErrStoreFull, failing closed); the service answers that
// descriptor OVER_LIMIT, counted as a backend error, rather than failing
// the call with UNAVAILABLE, which Envoy's failure_mode_deny: false (its
// default, and the README's) would admit: a client minting descriptor
// values to fill the store would then have every new key admitted
// without limit. Keys the store tracks are decided as before.
func TestStoreFullIsOverLimit(t *testing.T) {
	r := newRigStore(t, mustParse(t, apiConfig), []keyrate.Option{keyrate.WithMaxKeys(1)}, nil)
	call := func(user string) *rlspb.RateLimitResponse {
		t.Helper()
		return r.call(t, "api", desc("user="+user))
	}
	if resp := call("a"); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 9 {
		t.Fatalf("the first key: %v", resp)
	}
	for _, u := range []string{"b", "c"} {
		resp := call(u)
		if st := resp.Statuses[0]; resp.OverallCode != over || st.Code != over || st.LimitRemaining != 0 || st.CurrentLimit.GetRequestsPerUnit() != 10 {
			t.Fatalf("a new key in a full store: %v", resp)
		}
	}
	if resp := call("a"); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 8 {
		t.Fatalf("the tracked key: %v", resp)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.svc.Collector())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyrate_rls_backend_errors_total Store calls that failed (Redis unavailable, a store full), by domain and descriptor.
# TYPE keyrate_rls_backend_errors_total counter
keyrate_rls_backend_errors_total{descriptor="api.user",domain="api"} 2
`), "keyrate_rls_backend_errors_total"); err != nil {
		t.Fatal(err)
	}
}

// TestLimitOverrideMultiplier: an override's unit_multiplier lengthens
// its window; one whose window a time.Duration cannot hold (585 years
// wrapped to 21 days) is refused with InvalidArgument naming the value
// and the bound, rather than enforced over another window.
func TestLimitOverrideMultiplier(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	d := desc("user=dora")
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(5)}
	resp := r.call(t, "api", d)
	if st := resp.Statuses[0]; resp.OverallCode != ok || st.DurationUntilReset.AsDuration() != 5*time.Minute || st.CurrentLimit.GetUnitMultiplier().GetValue() != 5 {
		t.Fatalf("1 per 5 minutes: %v", resp)
	}
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(585)}
	_, err := r.try("api", 0, d)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "unit_multiplier 585") || !strings.Contains(err.Error(), "292") {
		t.Fatalf("1 per 585 years: %v, want InvalidArgument naming 585 and the bound, 292", err)
	}
}

// TestCheckAcrossWindowBoundary: a check (hits_addend 0) must not change
// what a window admits. The service once checked by spending 1 and
// refunding it; when the window ended between the two (the hook: the
// clock reaches the next minute, and 3 requests fill it), the refund
// landed in the new window and handed it a fourth admission. It now
// peeks (keyrate.PolicyLimiter.PeekTier), which spends nothing: the hook
// runs the same requests after the peek, and the new window admits 3.
func TestCheckAcrossWindowBoundary(t *testing.T) {
	r, h := newHookRig(t, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")
	spend := func() bool {
		resp, err := r.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{desc("user=a")}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode == ok
	}
	r.clock.Set(59 * time.Second)
	admitted := 0
	h.afterPeek = func() {
		r.clock.Set(time.Minute)
		for range 3 {
			if spend() {
				admitted++
			}
		}
	}
	check := desc("user=a")
	check.HitsAddend = wrapperspb.UInt64(0)
	if resp, err := r.try("api", 0, check); err != nil || resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 3 {
		t.Fatalf("the check: %v %v", resp, err)
	}
	if h.afterPeek != nil {
		t.Fatal("the check did not peek")
	}
	if spend() {
		admitted++
	}
	if admitted != 3 {
		t.Fatalf("user=a, 3 a minute, admitted %d times in the minute after a check straddled its start", admitted)
	}
}

// TestLimitOverrideKeysByValue: a descriptor with a limit override is
// counted under its own values, as envoyproxy/ratelimit counts it (its
// override takes no share_threshold), even where the config's rule for
// it shares one count among the values its wildcard matches.
func TestLimitOverrideKeysByValue(t *testing.T) {
	r := newRig(t, "share.yaml", `
domain: share
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
`)
	for _, v := range []string{"files/a.pdf", "files/b.csv"} {
		d := desc("files=" + v)
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		if resp := r.call(t, "share", d); resp.OverallCode != ok {
			t.Fatalf("%s under an override of 1 an hour, the first request for it: %v", v, resp)
		}
	}
}

// TestDenyAllNamesItsWindow: a rule one of whose windows allows 0
// requests denies every request, and its status names that window.
func TestDenyAllNamesItsWindow(t *testing.T) {
	r := newRig(t, "deny.yaml", `
domain: deny
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 10
      windows:
        - {unit: hour, requests_per_unit: 0}
`)
	resp := r.call(t, "deny", desc("user=a"))
	st := resp.Statuses[0]
	if resp.OverallCode != over || st.CurrentLimit.GetRequestsPerUnit() != 0 || st.CurrentLimit.GetUnit() != rlspb.RateLimitResponse_RateLimit_HOUR || st.DurationUntilReset.AsDuration() != time.Hour {
		t.Fatalf("a window of 0 an hour: %v", resp)
	}
}

// TestRefusedRequestMakesNoOverride refuses a request whose second
// descriptor is beyond a bound: the first one's new limit override must
// not have taken one of the MaxOverrides policies, which are never given
// back (a stream of refused requests would otherwise use them all up, and
// every new override after them would fail).
func TestRefusedRequestMakesNoOverride(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig)
	before := len(r.store.Policies())
	d := desc("user=a")
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_HOUR}
	long := desc("user=" + strings.Repeat("x", ratelimitsvc.DefaultMaxKeyBytes))
	badUnit := desc("user=b")
	badUnit.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 8}
	for _, second := range []*rlv3.RateLimitDescriptor{long, badUnit} {
		if _, err := r.try("api", 0, d, second); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a request with a bad descriptor: %v, want InvalidArgument", err)
		}
	}
	if after := len(r.store.Policies()); after != before {
		t.Fatalf("refused requests made %d override policies", after-before)
	}
}

// TestCheckAndRefundStatus: a check (hits_addend 0) and a refund
// (is_negative_hits) report what the key has left and when its fixed
// window resets, as a spend does (envoyproxy/ratelimit reports the time to
// the window's end for every descriptor of a rule), not 0 remaining and no
// reset: Envoy would put those in the headers, telling a client with 10
// left that it has none.
func TestCheckAndRefundStatus(t *testing.T) {
	r := newRig(t, "api.yaml", apiConfig, ratelimitsvc.WithHeaders(ratelimitsvc.Headers{}))
	r.clock.Set(15 * time.Second)
	check := desc("user=fresh")
	check.HitsAddend = wrapperspb.UInt64(0)
	st := r.call(t, "api", check).Statuses[0]
	if st.Code != ok || st.LimitRemaining != 10 || st.GetDurationUntilReset().AsDuration() != 45*time.Second {
		t.Errorf("a check of an unused key, 10 a minute, 15s into the minute: %v, want OK, 10 remaining, reset in 45s", st)
	}
	for range 3 {
		r.call(t, "api", desc("user=b"))
	}
	refund := desc("user=b")
	refund.IsNegativeHits = true
	resp := r.call(t, "api", desc("user=c"), refund)
	if st := resp.Statuses[1]; st.Code != ok || st.LimitRemaining != 8 || st.GetDurationUntilReset().AsDuration() != 45*time.Second {
		t.Errorf("a refund of 1 of 3 spent, 10 a minute: %v, want OK, 8 remaining, reset in 45s", st)
	}
	want := []*corev3.HeaderValue{
		{Key: "X-RateLimit-Limit", Value: "10"}, {Key: "X-RateLimit-Remaining", Value: "8"}, {Key: "X-RateLimit-Reset", Value: "45"},
	}
	if !headersEqual(resp.ResponseHeadersToAdd, want) {
		t.Errorf("headers %v, want %v (user=b's, after its refund; user=c has 9)", resp.ResponseHeadersToAdd, want)
	}
}
