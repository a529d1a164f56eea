package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/ratelimitsvc"
	"github.com/keyrate/keyrate/ratelimitsvc/internal/testredis"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// config is a limit of n a year: the tests count requests on the wall
// clock, and a window that ended during a test would refill and fail it
// (a minute's did, for a test run across the top of a minute). The
// in-process store's year never ends in a test: it starts at most 210
// days before the store does. Redis's starts at multiples of 365 days
// since the Unix epoch.
func config(n int) string {
	return fmt.Sprintf("domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: year\n      requests_per_unit: %d\n", n)
}

// syncBuf is a bytes.Buffer safe for the logger and the test at once.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// server is the command running in the test's process.
type server struct {
	sig     chan os.Signal
	code    chan int
	stderr  *syncBuf
	client  rlspb.RateLimitServiceClient
	health  healthpb.HealthClient
	metrics string
}

func start(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{sig: make(chan os.Signal, 1), code: make(chan int, 1), stderr: &syncBuf{}}
	addrs := make(chan [2]string, 1)
	go func() {
		s.code <- run(append([]string{"-grpc-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}, args...), io.Discard, s.stderr, s.sig,
			func(g, m string) { addrs <- [2]string{g, m} })
	}()
	var a [2]string
	select {
	case a = <-addrs:
	case code := <-s.code:
		t.Fatalf("exited %d: %s", code, s.stderr)
	}
	conn, err := grpc.NewClient(a[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.client, s.health, s.metrics = rlspb.NewRateLimitServiceClient(conn), healthpb.NewHealthClient(conn), "http://"+a[1]
	return s
}

func (s *server) stop(t *testing.T) {
	t.Helper()
	s.sig <- syscall.SIGTERM
	if code := <-s.code; code != 0 {
		t.Fatalf("exit %d: %s", code, s.stderr)
	}
}

func (s *server) limit(t *testing.T, user string) (uint32, rlspb.RateLimitResponse_Code) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.client.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Statuses[0].CurrentLimit.GetRequestsPerUnit(), resp.OverallCode
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServe runs the command in process: it serves the rate-limit and
// health services and /metrics, reloads on SIGHUP (keeping the last good
// config after a bad one), and shuts down on SIGTERM.
func TestServe(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run("backend="+backend, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "api.yaml")
			if err := os.WriteFile(path, []byte(config(3)), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-config", dir, "-backend", backend}
			if backend == "redis" {
				// The default timeout, 50ms, fails a call on a loaded
				// machine.
				args = append(args, "-redis-addr", testredis.Start(t).Addr, "-redis-timeout", "10s")
			}
			s := start(t, args...)
			for i := range 4 {
				if l, code := s.limit(t, "alice"); l != 3 || (code == rlspb.RateLimitResponse_OK) != (i < 3) {
					t.Fatalf("request %d: limit %d, %v", i, l, code)
				}
			}
			hr, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
			if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v %v", hr, err)
			}
			if code, body := get(t, s.metrics+"/healthcheck"); code != 200 || body != "OK\n" {
				t.Fatalf("/healthcheck: %d %q", code, body)
			}
			_, body := get(t, s.metrics+"/metrics")
			for _, want := range []string{
				`keyrate_rls_decisions_total{code="OK",descriptor="api.user",domain="api"} 3`,
				`keyrate_rls_decisions_total{code="OVER_LIMIT",descriptor="api.user",domain="api"} 1`,
				`keyrate_decisions_total{decision="allowed",policy="api.user",store="rls"} 3`,
				`keyrate_rls_config_reloads_total{result="success"} 1`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}

			// SIGHUP after a bad write: logged, counted, the config stays.
			if err := os.WriteFile(path, []byte("domain: api\ndescriptors: {\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s.sig <- syscall.SIGHUP
			waitFor(t, func() bool { return strings.Contains(s.stderr.String(), "config reload failed") })
			if l, _ := s.limit(t, "bob"); l != 3 {
				t.Fatalf("after a bad reload, limit %d", l)
			}
			if err := os.WriteFile(path, []byte(config(5)), 0o644); err != nil {
				t.Fatal(err)
			}
			s.sig <- syscall.SIGHUP
			waitFor(t, func() bool { l, _ := s.limit(t, "carol"); return l == 5 })
			// alice spent 3 (the denied fourth spent nothing): 2 left of 5.
			for i := range 3 {
				if _, code := s.limit(t, "alice"); (code == rlspb.RateLimitResponse_OK) != (i < 2) {
					t.Fatalf("alice under 5, request %d: %v", i, code)
				}
			}
			s.stop(t)
			if !strings.Contains(s.stderr.String(), `msg="shut down"`) {
				t.Fatalf("log: %s", s.stderr)
			}
		})
	}
}

// waitFor polls cond until it holds, for up to 30s: the reload runs on
// the watcher's goroutine, and a file write's events come when the
// file system sends them.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUsageErrors exits 2 with one line naming the problem.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("domain: api\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-config is required"},
		{[]string{"-config", bad}, bad + `:4:51: requests_per_unit "x" is not a whole number`},
		{[]string{"-config", dir, "-backend", "disk"}, `-backend "disk": want memory or redis`},
		{[]string{"-config", dir, "-backend", "redis"}, "-backend redis needs -redis-addr"},
		{[]string{"-config", dir, "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-config", dir, "-backend", "redis", "-redis-addr", "x:1", "-redis-fallback-nodes", "2"}, "-redis-fallback-nodes 2 needs -redis-failure local"},
		{[]string{"-config", dir, "-backend", "redis", "-redis-addr", "x:1", "-redis-pipelining=false", "-redis-pipeline-batch", "64"}, "-redis-pipeline-batch 64 needs -redis-pipelining"},
		{[]string{"-config", good, "-backend", "redis", "-redis-addr", "x:1", "-redis-pipeline-inflight", "-1"}, "pipelining InFlight -1 is not from 0 (the default) to 1024"},
		{[]string{"-config", dir, "-redis-health-check"}, "-redis-health-check needs -backend redis"},
		{[]string{"-config", dir, "-backend", "redis", "-redis-addr", "x:1", "-redis-health-interval", "5s"}, "-redis-health-interval 5s needs -redis-health-check"},
		{[]string{"-config", dir, "-backend", "redis", "-redis-addr", "x:1", "-redis-health-check", "-redis-health-interval", "-1s"}, "-redis-health-interval -1s is below 0"},
	} {
		var stderr bytes.Buffer
		if code := run(c.args, io.Discard, &stderr, nil, nil); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"-h"}, &stdout, io.Discard, nil, nil); code != 0 || !strings.Contains(stdout.String(), "-redis-deny-cache") {
		t.Errorf("-h: exit %d, %q", code, stdout.String())
	}
}

// TestReloadWithoutWatcher: when the config cannot be watched (here the
// watcher fails at once; in life, inotify's limits), the command says to
// reload with SIGHUP, and SIGHUP reloads.
func TestReloadWithoutWatcher(t *testing.T) {
	defer func(w func(*ratelimitsvc.Service, context.Context, []string, <-chan struct{}, func(error)) error) {
		watch = w
	}(watch)
	watch = func(*ratelimitsvc.Service, context.Context, []string, <-chan struct{}, func(error)) error {
		return errors.New("inotify: too many instances")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(path, []byte(config(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-config", path)
	waitFor(t, func() bool { return strings.Contains(s.stderr.String(), "reload with SIGHUP") })
	if err := os.WriteFile(path, []byte(config(5)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.sig <- syscall.SIGHUP
	waitFor(t, func() bool { l, _ := s.limit(t, "alice"); return l == 5 })
	s.stop(t)
}

// TestFallbackShare: under -redis-failure local each process answers
// from a store of its own while Redis is down, so a fleet of N would
// admit N times each limit; -redis-fallback-nodes 2 gives this process
// half of it (as the fleet's count through Redis would, once both had
// announced themselves).
func TestFallbackShare(t *testing.T) {
	srv := testredis.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(path, []byte(config(10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-config", path, "-backend", "redis", "-redis-addr", srv.Addr,
		"-redis-failure", "local", "-redis-fallback-nodes", "2")
	srv.Stop()
	admitted := 0
	for range 10 {
		if _, code := s.limit(t, "x"); code == rlspb.RateLimitResponse_OK {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("10 a year, Redis down, a fleet of 2: this process admitted %d, want 5", admitted)
	}
	s.stop(t)
}

// TestRedisHealthCheck: with -redis-health-check the health services
// answer NOT_SERVING while Redis does not answer, and SERVING once it does
// again; /healthcheck follows. The test watches the rate-limit service's
// status (health's Watch stream), which changes after the server's.
func TestRedisHealthCheck(t *testing.T) {
	srv := testredis.Start(t)
	path := filepath.Join(t.TempDir(), "api.yaml")
	if err := os.WriteFile(path, []byte(config(10)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, "-config", path, "-backend", "redis", "-redis-addr", srv.Addr,
		"-redis-health-check", "-redis-health-interval", "10ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang's guard, not a wait
	defer cancel()
	w, err := s.health.Watch(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := w.Recv()
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		if r.Status != want {
			t.Fatalf("status %v, want %v", r.Status, want)
		}
		if want == healthpb.HealthCheckResponse_SERVING {
			// A PING slower than 1s on a busy machine would flip it back
			// for a moment: wait for 200 rather than read it once.
			waitFor(t, func() bool { code, _ := get(t, s.metrics+"/healthcheck"); return code == 200 })
			return
		}
		if got, body := get(t, s.metrics+"/healthcheck"); got != 503 { // Redis is down: every PING fails
			t.Fatalf("/healthcheck with the service %v: %d %q, want 503", want, got, body)
		}
	}
	next(healthpb.HealthCheckResponse_SERVING)
	srv.Stop()
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	next(healthpb.HealthCheckResponse_SERVING)
	cancel()
	s.stop(t)
}
