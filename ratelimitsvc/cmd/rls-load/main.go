// Command rls-load measures rate-limit services side by side, in one run
// on one machine: envoyproxy/ratelimit with Redis, keyrate-rls with Redis
// (its defaults, then without pipelining, then with a deny cache) and
// keyrate-rls in process, and two floors (keyrate-rls deciding nothing,
// and a bare grpc-go server answering OK: what any service over gRPC
// costs), each a process of its own on loopback, each
// driven over gRPC by 1, 8 and 64 concurrent clients with the same
// stream of requests. It prints, for every service and concurrency, the
// requests per second, the p50 and p99 latency, the CPU time the
// service's process and redis-server's spent per request (what an answer
// costs the machine, comparable where throughput is not: the clients
// share its cores), and the bound held: the admissions each descriptor
// got in each window, counted on the client side, against the limit.
//
//	go run ./ratelimitsvc/cmd/rls-load -envoy-bin $(go env GOPATH)/bin/service_cmd
//
// (make rlsbench). It starts its own redis-server (from PATH) and builds
// keyrate-rls from this checkout. Without -envoy-bin, or when the binary
// is not there, it measures keyrate alone and says so.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keyrate/keyrate/ratelimitsvc/internal/rlsproc"
	"github.com/keyrate/keyrate/ratelimitsvc/internal/testredis"
)

// The workload: users, each limited to perSecond requests a second
// (envoyproxy/ratelimit's fixed window), picked at random by each client.
const configTmpl = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: %d
`

type opts struct {
	envoyBin    string
	keyrateBin  string
	conc        []int
	dur, warm   time.Duration
	users, rate int
	out         string
	only        *regexp.Regexp // nil: every service
	extra       []string       // more flags for every keyrate-rls
}

func main() {
	var o opts
	var conc string
	flag.StringVar(&o.envoyBin, "envoy-bin", "", "envoyproxy/ratelimit's service_cmd (go install github.com/envoyproxy/ratelimit/src/service_cmd@...); empty: measure keyrate alone")
	flag.StringVar(&o.keyrateBin, "keyrate-bin", "", "a keyrate-rls binary (default: built from this checkout)")
	flag.StringVar(&conc, "clients", "1,8,64", "the concurrent clients of each measurement, comma-separated")
	flag.DurationVar(&o.dur, "duration", 5*time.Second, "how long each measurement sends")
	flag.DurationVar(&o.warm, "warmup", time.Second, "how long each measurement sends before it counts")
	flag.IntVar(&o.users, "users", 1000, "distinct descriptors (user=u<i>)")
	flag.IntVar(&o.rate, "limit", 20, "each descriptor's limit, requests a second")
	flag.StringVar(&o.out, "o", "", "also write the report to this file")
	only := flag.String("only", "", "measure only the services whose row name matches this regular expression")
	bare := flag.String("serve-bare", "", "serve a bare gRPC rate-limit service (every answer OK) at this address, and measure nothing: the floor's process")
	extra := flag.String("keyrate-flags", "", "more flags for every keyrate-rls, space-separated (say, -redis-pipeline-batch 64)")
	flag.Parse()
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rls-load: -only: %v\n", err)
			os.Exit(2)
		}
		o.only = re
	}
	o.extra = strings.Fields(*extra)
	if *bare != "" {
		if err := serveBare(*bare); err != nil {
			fmt.Fprintf(os.Stderr, "rls-load: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for c := range strings.SplitSeq(conc, ",") {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "rls-load: -clients %q\n", conc)
			os.Exit(2)
		}
		o.conc = append(o.conc, n)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "rls-load: %v\n", err)
		os.Exit(1)
	}
}

// subject is one service under test.
type subject struct {
	name  string
	start func() (addr string, pid int, stop func(), err error)
}

func run(o opts) error {
	dir, err := os.MkdirTemp("", "rls-load")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not on PATH: %w", err)
	}
	rs, err := testredis.Run(redisBin, dir)
	if err != nil {
		return err
	}
	defer rs.Stop()
	if o.keyrateBin == "" {
		o.keyrateBin = filepath.Join(dir, "keyrate-rls")
		build := exec.Command("go", "build", "-o", o.keyrateBin, "github.com/keyrate/keyrate/ratelimitsvc/cmd/keyrate-rls")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building keyrate-rls: %w", err)
		}
	}
	cfgDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(cfgDir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, configTmpl, o.rate), 0o644); err != nil {
		return err
	}
	floorDir := filepath.Join(dir, "floor")
	if err := os.MkdirAll(floorDir, 0o755); err != nil {
		return err
	}
	floorCfg := filepath.Join(floorDir, "config.yaml")
	if err := os.WriteFile(floorCfg, []byte("domain: other\n"), 0o644); err != nil {
		return err
	}
	var subjects []subject
	note := ""
	if o.envoyBin != "" {
		if _, err := os.Stat(o.envoyBin); err != nil {
			note = fmt.Sprintf("envoyproxy/ratelimit not measured: %v", err)
		} else {
			subjects = append(subjects, subject{"envoyproxy/ratelimit+redis", func() (string, int, func(), error) {
				port, err := rlsproc.FreePort()
				if err != nil {
					return "", 0, nil, err
				}
				// Its stats are off, which can only flatter its figures.
				env, err := rlsproc.EnvoyEnv(filepath.Join(dir, "runtime"), rs.Addr, port)
				if err != nil {
					return "", 0, nil, err
				}
				return startProc(o.envoyBin, nil, env, port)
			}})
		}
	} else {
		note = "envoyproxy/ratelimit not measured: no -envoy-bin"
	}
	keyrate := func(name string, args ...string) subject {
		return subject{name, func() (string, int, func(), error) {
			port, err := rlsproc.FreePort()
			if err != nil {
				return "", 0, nil, err
			}
			// -redis-timeout 10s: envoyproxy/ratelimit's Redis timeout
			// (keyrate-rls's default, 50ms, can fail calls on a loaded
			// 2-core machine, which would measure the failure policy).
			a := append([]string{"-config", cfg, "-grpc-addr", fmt.Sprintf("127.0.0.1:%d", port), "-metrics-addr", "", "-redis-timeout", "10s"}, args...)
			a = append(a, o.extra...)
			if strings.HasPrefix(name, "floor") {
				a[1] = floorCfg
			}
			return startProc(o.keyrateBin, a, nil, port)
		}}
	}
	subjects = append(subjects,
		keyrate("keyrate+redis", "-backend", "redis", "-redis-addr", rs.Addr),
		keyrate("keyrate+redis, no pipelining", "-backend", "redis", "-redis-addr", rs.Addr, "-redis-pipelining=false"),
		keyrate("keyrate+redis, deny cache", "-backend", "redis", "-redis-addr", rs.Addr, "-redis-deny-cache", "65536"),
		keyrate("keyrate in process", "-backend", "memory"),
		// The baseline: the same gRPC calls answered OK by a config that
		// has no rule for them, which decides nothing: what the clients,
		// gRPC and the service's matching cost on this machine.
		keyrate("floor: keyrate-rls, no rule matches", "-backend", "memory"),
	)
	// The floor of any service: a grpc-go server that answers OK, with
	// none of keyrate-rls's code; this binary, run again.
	if self, err := os.Executable(); err == nil {
		subjects = append(subjects, subject{"floor: a bare grpc-go server", func() (string, int, func(), error) {
			port, err := rlsproc.FreePort()
			if err != nil {
				return "", 0, nil, err
			}
			return startProc(self, []string{"-serve-bare", fmt.Sprintf("127.0.0.1:%d", port)}, nil, port)
		}})
	}

	var rep strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&rep, "rls-load: %s, %s/%s, %d CPUs, %s, host %s\n", time.Now().UTC().Format(time.RFC3339), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), host)
	fmt.Fprintf(&rep, "workload: %d descriptors (user=u<i>, picked uniformly), each %d a second (fixed window), one descriptor a request; %v a point after %v of warm-up; one gRPC connection per 8 clients\n", o.users, o.rate, o.dur, o.warm)
	if note != "" {
		fmt.Fprintln(&rep, note)
	}
	fmt.Fprintf(&rep, "\n| service | clients | requests/s | p50 | p99 | service CPU/request | redis CPU/request | failed | over limit | windows checked | most admitted in a window (limit %d) | windows over the limit |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", o.rate)
	for _, s := range subjects {
		if o.only != nil && !o.only.MatchString(s.name) {
			continue
		}
		addr, pid, stop, err := s.start()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		for _, c := range o.conc {
			if err := rs.FlushAll(); err != nil {
				stop()
				return err
			}
			cpu := &cpuMeter{pids: []int{pid, rs.Pid()}}
			r, err := measure(addr, c, o, cpu)
			if err != nil {
				stop()
				return fmt.Errorf("%s, %d clients: %w", s.name, c, err)
			}
			line := fmt.Sprintf("| %s | %d | %.0f | %v | %v | %s | %s | %d | %.1f%% | %d | %d | %d |\n", s.name, c, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond),
				cpu.perRequest(0, r.requests), cpu.perRequest(1, r.requests), r.errors, 100*r.overFrac, r.windows, r.most, r.violations)
			if strings.HasPrefix(s.name, "floor") { // it limits nothing: no bound to hold
				line = fmt.Sprintf("| %s | %d | %.0f | %v | %v | %s | %s | %d | — | — | — | — |\n", s.name, c, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond),
					cpu.perRequest(0, r.requests), cpu.perRequest(1, r.requests), r.errors)
			}
			rep.WriteString(line)
			fmt.Fprint(os.Stderr, line)
		}
		stop()
	}
	fmt.Fprintf(&rep, "\nCPU/request is the CPU time (user and system, every thread) the service's process and redis-server's used over the counted interval, by /proc/<pid>/stat (10 ms ticks), divided by the requests answered in it: what each answer costs the machine, whatever else shares it, so that it can be compared where throughput cannot (the load generator runs on the same cores). The in-process rows' redis figure is an idle server's.\n")
	fmt.Fprintf(&rep, "\nA window's admissions are those whose request was sent and answered within it (by this process's clock); a request in flight across a boundary is counted in neither, so a count above the limit is a real violation, never an artefact of the counting (and \"windows over the limit\" a lower bound of them).\n")
	fmt.Print(rep.String())
	if o.out != "" {
		return os.WriteFile(o.out, []byte(rep.String()), 0o644)
	}
	return nil
}

// startProc starts a server and waits (up to a minute) until its gRPC
// health service answers SERVING on loopback port port; it returns the
// server's address and process ID, and a function that stops it.
func startProc(bin string, args, env []string, port int) (string, int, func(), error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := rlsproc.WaitServing(addr, time.Minute, exited); err != nil {
		stop()
		return "", 0, nil, err
	}
	return addr, cmd.Process.Pid, stop, nil
}

// result is one measurement.
type result struct {
	rps            float64
	p50, p99       time.Duration
	overFrac       float64
	windows        int
	most           int
	violations     int
	requests, over int
	errors         int
}

// admission is one admitted request: its descriptor and the whole
// seconds (Unix) it was sent and answered in.
type admission struct {
	user       int32
	sent, recv int64
}

// measure drives the service at addr with clients concurrent clients for
// o.warm, then o.dur counted, and cpu reads its processes' CPU time over
// the counted interval.
func measure(addr string, clients int, o opts, cpu *cpuMeter) (result, error) {
	nconn := (clients + 7) / 8
	conns := make([]*grpc.ClientConn, nconn)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	start := time.Now()
	countFrom, end := start.Add(o.warm), start.Add(o.warm+o.dur)
	metered := make(chan struct{})
	go func() {
		defer close(metered)
		time.Sleep(time.Until(countFrom))
		cpu.begin()
		time.Sleep(time.Until(end))
		cpu.finish()
	}()
	defer func() { <-metered }()
	var firstErr atomic.Value
	lats := make([][]time.Duration, clients)
	adms := make([][]admission, clients)
	overs := make([]int, clients)
	errs := make([]int, clients)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			client := rlspb.NewRateLimitServiceClient(conns[g%nconn])
			rng := rand.New(rand.NewPCG(uint64(g), 27))
			for {
				u := int32(rng.IntN(o.users))
				req := &rlspb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{{
					Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprintf("u%d", u)}},
				}}}
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := client.ShouldRateLimit(ctx, req)
				cancel()
				t1 := time.Now()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					errs[g]++
					if errs[g] > 100 {
						return
					}
					continue
				}
				allowed := resp.OverallCode == rlspb.RateLimitResponse_OK
				if allowed {
					adms[g] = append(adms[g], admission{u, t0.Unix(), t1.Unix()})
				}
				if t0.Before(countFrom) {
					continue
				}
				lats[g] = append(lats[g], t1.Sub(t0))
				if !allowed {
					overs[g]++
				}
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	r := result{}
	for g := range clients {
		all = append(all, lats[g]...)
		r.over += overs[g]
		r.errors += errs[g]
	}
	if err, _ := firstErr.Load().(error); err != nil && r.errors > 100 {
		return result{}, fmt.Errorf("%d errors: %w", r.errors, err)
	}
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Fprintf(os.Stderr, "rls-load: %d calls failed, such as: %v\n", r.errors, err)
	}
	if len(all) == 0 {
		return r, fmt.Errorf("no request answered")
	}
	slices.Sort(all)
	r.requests = len(all)
	r.rps = float64(len(all)) / o.dur.Seconds()
	r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	r.overFrac = float64(r.over) / float64(len(all))
	// The bound: admissions per descriptor per window, counting those sent
	// and answered within one window.
	type win struct {
		user int32
		sec  int64
	}
	counts := map[win]int{}
	for g := range clients {
		for _, a := range adms[g] {
			if a.sent == a.recv {
				counts[win{a.user, a.sent}]++
			}
		}
	}
	r.windows = len(counts)
	for _, n := range counts {
		r.most = max(r.most, n)
		if n > o.rate {
			r.violations++
		}
	}
	return r, nil
}
