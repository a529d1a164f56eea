package ratelimitsvc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/ratelimitsvc"
	"github.com/keyrate/keyrate/ratelimitsvc/internal/rlsproc"
	"github.com/keyrate/keyrate/ratelimitsvc/internal/testredis"
	"github.com/keyrate/keyrate/redisbucket"
)

// The reference service's binary: $KEYRATE_ENVOY_RATELIMIT, or
// service_cmd on PATH or in $(go env GOPATH)/bin, as
//
//	go install github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36
//
// puts it (.ci/run does). Without it the differential tests skip, unless
// KEYRATE_REQUIRE_ENVOY_RATELIMIT is 1 (CI), which fails them.
const (
	envoyBinEnv     = "KEYRATE_ENVOY_RATELIMIT"
	envoyRequireEnv = "KEYRATE_REQUIRE_ENVOY_RATELIMIT"
)

func envoyBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envoyBinEnv); p != "" {
		return p
	}
	if p, err := exec.LookPath("service_cmd"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for dir := range strings.SplitSeq(strings.TrimSpace(string(out)), string(os.PathListSeparator)) {
			if p := filepath.Join(dir, "bin", "service_cmd"); fileExists(p) {
				return p
			}
		}
	}
	msg := "envoyproxy/ratelimit's binary is not installed: go install github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36 (or set " + envoyBinEnv + ")"
	if os.Getenv(envoyRequireEnv) == "1" {
		t.Fatal(msg + ", and " + envoyRequireEnv + "=1")
	}
	t.Skip(msg)
	return ""
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// startEnvoyRatelimit runs envoyproxy/ratelimit on config (one file) and
// the Redis at redisAddr, and returns a client of its gRPC server once
// it is healthy.
func startEnvoyRatelimit(t *testing.T, bin, config, redisAddr string) rlspb.RateLimitServiceClient {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "config.yaml", config)
	grpcPort, err := rlsproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	env, err := rlsproc.EnvoyEnv(root, redisAddr, grpcPort)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	logf := filepath.Join(root, "log")
	out, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		out.Close()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", grpcPort)
	if err := rlsproc.WaitServing(addr, time.Minute, exited); err != nil {
		log, _ := os.ReadFile(logf)
		t.Fatalf("envoyproxy/ratelimit: %v: %s", err, log)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

// startKeyrateRedis serves config with redisbucket on redisAddr.
func startKeyrateRedis(t *testing.T, config, redisAddr string) rlspb.RateLimitServiceClient {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	store, err := redisbucket.New(client, keyrate.PerSecond(1), redisbucket.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg, err := ratelimitsvc.ParseConfig("diff.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ratelimitsvc.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, svc)
}

// diffConfig is a fixed-window config of envoyproxy/ratelimit's features
// that both services read alike (the reference binary's wildcards are
// trailing ones only).
const diffConfig = `
domain: diff
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 4
  - key: user
    value: vip
    rate_limit:
      unit: minute
      requests_per_unit: 6
  - key: api
    value: v1*
    rate_limit:
      unit: hour
      requests_per_unit: 5
  - key: tenant
    descriptors:
      - key: path
        rate_limit:
          name: tenant_path
          unit: minute
          requests_per_unit: 3
      - key: path
        value: /admin
        rate_limit:
          unit: second
          requests_per_unit: 0
  - key: region
    value: eu
    rate_limit:
      replaces:
        - name: tenant_path
      unit: minute
      requests_per_unit: 7
  - key: shadow
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
  - key: internal
    rate_limit:
      unlimited: true
  - key: detailed
    detailed_metric: true
    rate_limit:
      unit: day
      requests_per_unit: 3
`

// TestDifferentialEnvoyRatelimit runs envoyproxy/ratelimit itself and
// keyrate (redisbucket) on the same config, the same real redis-server and
// the same stream of requests, one request to each in turn, and compares
// every status: the code, the current limit, the remaining count, and the
// time until reset (to the second: envoyproxy/ratelimit counts whole
// seconds). Both count fixed windows aligned to the Unix epoch on the one
// machine's clock. Each burst of requests runs with descriptor values of
// its own, and ends at the first request during which a second boundary
// passed (read before the one service's call and after the other's),
// since the two services could place that request on either side of it
// and count the burst's values apart from then on; a minute's, an hour's
// or a day's boundary is a second's too. How many requests a second the
// machine manages changes how many bursts it takes, not the outcome.
func TestDifferentialEnvoyRatelimit(t *testing.T) {
	bin := envoyBinary(t)
	srv := testredis.Start(t)
	envoy := startEnvoyRatelimit(t, bin, diffConfig, srv.Addr)
	kr := startKeyrateRedis(t, diffConfig, srv.Addr)

	rng := rand.New(rand.NewPCG(27, 2026))
	pool := func(b int) [][]string {
		v := func(s string) string { return fmt.Sprintf("%s-%d", s, b) }
		return [][]string{
			{"user=" + v("alice")}, {"user=" + v("bob")}, {"user=vip"},
			{"api=v1-" + v("x")}, {"api=v1"}, {"api=v2"},
			{"tenant=" + v("t1"), "path=/x"}, {"tenant=" + v("t1"), "path=/admin"}, {"tenant=" + v("t2"), "path=/y"},
			{"region=eu"}, {"region=us"},
			{"shadow=" + v("s")}, {"internal=" + v("i")}, {"detailed=" + v("d")},
			{"user=" + v("alice"), "extra=1"}, {"nope=" + v("n")},
		}
	}
	const want = 360 // responses to compare
	compared, cut := 0, 0
	kinds := map[string]int{} // what the compared statuses were, to show the stream exercised each
	for burst := 0; compared < want; burst++ {
		if burst == 1000 {
			t.Fatalf("%d responses compared in 1000 bursts of 30 requests: a second boundary passed during nearly every request", compared)
		}
		// vip, v1, region=eu are shared by every burst: give each burst
		// its own domain-level values by suffixing the burst only where
		// the config allows any value; the shared ones run in burst 0.
		p := pool(burst)
		if burst > 0 {
			p = slicesWithout(p, "user=vip", "api=v1", "region=eu")
		}
		var reqs []*rlspb.RateLimitRequest
		for range 30 {
			n := 1 + rng.IntN(3)
			req := &rlspb.RateLimitRequest{Domain: "diff"}
			for range n {
				req.Descriptors = append(req.Descriptors, desc(p[rng.IntN(len(p))]...))
			}
			if rng.IntN(10) == 0 {
				req.Domain = "unknown"
			}
			reqs = append(reqs, req)
		}
		for i, req := range reqs {
			sec := time.Now().Unix()
			e := call(t, envoy, req)
			k := call(t, kr, req)
			if time.Now().Unix() != sec {
				// A second passed while the two services decided: they
				// may have counted the request in different windows, and
				// their counts of this burst's values may differ from
				// here on.
				cut++
				break
			}
			if err := sameResponse(e, k); err != nil {
				t.Fatalf("burst %d request %d %v:\n%v\nenvoyproxy/ratelimit: %v\nkeyrate:              %v", burst, i, req, err, e, k)
			}
			compared++
			for _, st := range k.Statuses {
				switch {
				case st.CurrentLimit == nil && st.LimitRemaining == 0:
					kinds["no rule"]++
				case st.CurrentLimit == nil:
					kinds["unlimited"]++
				case st.Code == over:
					kinds["over"]++
				case st.LimitRemaining == 0:
					kinds["ok, none left"]++
				default:
					kinds["ok"]++
				}
			}
		}
	}
	t.Logf("compared %d responses (%d bursts cut at a second boundary): statuses %v", compared, cut, kinds)
	for _, k := range []string{"no rule", "unlimited", "over", "ok, none left", "ok"} {
		if kinds[k] == 0 {
			t.Errorf("no status of kind %q: the stream does not exercise it", k)
		}
	}
}

// TestDifferentialKnownDifference pins where the two services differ on
// purpose: envoyproxy/ratelimit counts a denied request's hits (INCRBY
// before comparing), so a request of several hits that does not fit
// leaves the window full for every later one; keyrate decides all or
// nothing and spends nothing on a denial, so smaller requests still fit.
// With hits_addend 1 the two agree (a denied request finds the window
// full either way).
func TestDifferentialKnownDifference(t *testing.T) {
	bin := envoyBinary(t)
	srv := testredis.Start(t)
	const cfg = "domain: diff\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 10}\n"
	envoy := startEnvoyRatelimit(t, bin, cfg, srv.Addr)
	kr := startKeyrateRedis(t, cfg, srv.Addr)
	for attempt := 0; ; attempt++ {
		user := fmt.Sprintf("user=known-%d-%d", time.Now().UnixNano(), attempt)
		t0 := time.Now()
		var codes [2][]rlspb.RateLimitResponse_Code
		var left [2][]uint32
		for _, hits := range []uint64{8, 5, 2} {
			d := desc(user)
			d.HitsAddend = wrapperspb.UInt64(hits)
			req := &rlspb.RateLimitRequest{Domain: "diff", Descriptors: []*rlv3.RateLimitDescriptor{d}}
			for i, c := range []rlspb.RateLimitServiceClient{envoy, kr} {
				resp := call(t, c, req)
				codes[i] = append(codes[i], resp.OverallCode)
				left[i] = append(left[i], resp.Statuses[0].LimitRemaining)
			}
		}
		if t0.Truncate(time.Hour) != time.Now().Truncate(time.Hour) && attempt < 3 {
			continue
		}
		// A denial has 0 remaining in both, though keyrate would still
		// take 2 hits.
		want := [2][]rlspb.RateLimitResponse_Code{{ok, over, over}, {ok, over, ok}}
		wantLeft := [2][]uint32{{2, 0, 0}, {2, 0, 0}}
		if fmt.Sprint(codes, left) != fmt.Sprint(want, wantLeft) {
			t.Fatalf("8, 5 then 2 hits of 10 an hour: envoyproxy/ratelimit %v remaining %v, keyrate %v remaining %v; want %v", codes[0], left[0], codes[1], left[1], fmt.Sprint(want, wantLeft))
		}
		return
	}
}

func slicesWithout(p [][]string, drop ...string) [][]string {
	var out [][]string
next:
	for _, d := range p {
		for _, x := range drop {
			if len(d) == 1 && d[0] == x {
				continue next
			}
		}
		out = append(out, d)
	}
	return out
}

func call(t *testing.T, c rlspb.RateLimitServiceClient, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sameResponse compares two responses as the differential test does.
func sameResponse(e, k *rlspb.RateLimitResponse) error {
	if e.OverallCode != k.OverallCode {
		return fmt.Errorf("overall code %v, keyrate %v", e.OverallCode, k.OverallCode)
	}
	if len(e.Statuses) != len(k.Statuses) {
		return fmt.Errorf("%d statuses, keyrate %d", len(e.Statuses), len(k.Statuses))
	}
	for i := range e.Statuses {
		es, ks := e.Statuses[i], k.Statuses[i]
		if es.Code != ks.Code || es.LimitRemaining != ks.LimitRemaining {
			return fmt.Errorf("status %d: %v remaining %d, keyrate %v remaining %d", i, es.Code, es.LimitRemaining, ks.Code, ks.LimitRemaining)
		}
		el, kl := es.CurrentLimit, ks.CurrentLimit
		if (el == nil) != (kl == nil) || el.GetRequestsPerUnit() != kl.GetRequestsPerUnit() || el.GetUnit() != kl.GetUnit() {
			return fmt.Errorf("status %d: current_limit %v, keyrate %v", i, el, kl)
		}
		ed, kd := es.DurationUntilReset, ks.DurationUntilReset
		if (ed == nil) != (kd == nil) {
			return fmt.Errorf("status %d: duration_until_reset %v, keyrate %v", i, ed, kd)
		}
		// envoyproxy/ratelimit: the unit less the whole seconds since the
		// window began, so up to a second more than the exact time left.
		if ed != nil {
			if diff := ed.AsDuration() - kd.AsDuration(); diff < 0 || diff > time.Second {
				return fmt.Errorf("status %d: duration_until_reset %v, keyrate %v", i, ed.AsDuration(), kd.AsDuration())
			}
		}
	}
	return nil
}
