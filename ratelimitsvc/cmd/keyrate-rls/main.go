// Command keyrate-rls is Envoy's rate-limit service
// (envoy.service.ratelimit.v3.RateLimitService) deciding with keyrate,
// under a config in envoyproxy/ratelimit's YAML format:
//
//	keyrate-rls -config /etc/ratelimit/config            # in process
//	keyrate-rls -config rl.yaml -backend redis -redis-addr 127.0.0.1:6379
//
// It serves gRPC (the rate-limit service and the standard health
// service) on -grpc-addr, and Prometheus metrics on -metrics-addr
// (/metrics). It reloads the config when a file changes and on SIGHUP,
// keeping the last good config when a reload fails, and shuts down
// gracefully on SIGINT or SIGTERM. Run keyrate-rls -h for the flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
	"github.com/keyrate/keyrate/ratelimitsvc"
	"github.com/keyrate/keyrate/redisbucket"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sig, nil))
}

const help = `usage: keyrate-rls -config PATH [flags]

keyrate-rls serves Envoy's rate-limit service over gRPC, deciding each
descriptor with a keyrate store under envoyproxy/ratelimit's YAML config
(domain, descriptors, rate_limit, unlimited, shadow_mode, replaces,
wildcards...), plus keyrate's fields in a rate_limit block: algorithm
(fixed-window, the default, as envoyproxy/ratelimit counts;
sliding-window; token-bucket; sliding-log, with -backend redis only),
burst (token-bucket) and windows (more limits enforced together). -config takes files and directories (their *.yaml and *.yml
files), comma-separated or repeated.

The config reloads when a file changes and on SIGHUP; a config that fails
to load is logged and counted, and the last good one stays. SIGINT and
SIGTERM shut down gracefully: the health service answers NOT_SERVING, the
calls in flight finish (up to -shutdown-grace), then the process exits 0.
Bad flags or a bad config at start exit 2; a server that cannot start, 1.

Flags:
`

// flags are what the command line resolves to.
type flags struct {
	configs        []string
	grpcAddr       string
	metricsAddr    string
	backend        string
	maxKeys        int
	redisAddrs     []string
	redisCluster   bool
	redisPrefix    string
	redisTimeout   time.Duration
	redisFailure   string
	fallbackNodes  int
	redisDenyCache int
	leaseSize      int
	leaseLife      time.Duration
	breaker        bool
	pipelining     bool
	pipeInFlight   int
	pipeBatch      int
	redisPool      int
	redisHealth    bool
	healthEvery    time.Duration
	shadow         bool
	headers        bool
	headerNames    ratelimitsvc.Headers
	maxDescriptors int
	maxEntries     int
	maxKeyBytes    int
	maxRecvBytes   int
	grace          time.Duration
}

// listFlag is a comma-separated, repeatable flag.
type listFlag struct{ v *[]string }

func (l listFlag) String() string {
	if l.v == nil {
		return ""
	}
	return strings.Join(*l.v, ",")
}

func (l listFlag) Set(s string) error {
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.v = append(*l.v, p)
		}
	}
	return nil
}

func parse(args []string, stdout io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("keyrate-rls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(listFlag{&f.configs}, "config", "config `paths`: files or directories, comma-separated or repeated")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:8081", "the `host:port` of the gRPC server")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "127.0.0.1:9090", "the `host:port` of the HTTP server of /metrics and /healthcheck (empty for none)")
	fs.StringVar(&f.backend, "backend", "memory", "the store: memory (in process, atomicbucket) or redis (redisbucket)")
	fs.IntVar(&f.maxKeys, "max-keys", 0, "memory: the most keys the store tracks (0: no cap); past it, new keys fail closed")
	fs.Var(listFlag{&f.redisAddrs}, "redis-addr", "redis: the server's `host:port`, or a Cluster's nodes, comma-separated")
	fs.BoolVar(&f.redisCluster, "redis-cluster", false, "redis: the addresses are a Redis Cluster's")
	fs.StringVar(&f.redisPrefix, "redis-prefix", redisbucket.DefaultPrefix, "redis: the prefix of every key")
	fs.DurationVar(&f.redisTimeout, "redis-timeout", 50*time.Millisecond, "redis: the most one call may take")
	fs.StringVar(&f.redisFailure, "redis-failure", "closed", "redis: what to answer when Redis does not: closed (the call fails with UNAVAILABLE, for Envoy's failure_mode_deny to decide: failure_mode_deny: false admits it), open (allow every request: no limit at all during an outage) or local (an in-process store, each process a share of every limit: see -redis-fallback-nodes)")
	fs.IntVar(&f.fallbackNodes, "redis-fallback-nodes", 0, "redis, -redis-failure local: the processes sharing Redis, each of which answers with 1/n of every limit while Redis is down (0: the count of processes heard from through Redis, which is 1 until others announce themselves)")
	fs.IntVar(&f.redisDenyCache, "redis-deny-cache", 0, "redis: keys to answer locally while Redis denies them (0: none)")
	fs.IntVar(&f.leaseSize, "redis-lease-size", 0, "redis: tokens a hot token-bucket key takes from Redis at once (0: no leases)")
	fs.DurationVar(&f.leaseLife, "redis-lease-life", 10*time.Millisecond, "redis: how long a lease's tokens may be handed out")
	fs.BoolVar(&f.breaker, "redis-breaker", false, "redis: stop calling a failing Redis for a back-off")
	fs.BoolVar(&f.pipelining, "redis-pipelining", true, "redis: send the calls that arrive while others are in flight together, in one pipeline (-redis-pipelining=false: one round trip each)")
	fs.IntVar(&f.pipeInFlight, "redis-pipeline-inflight", 0, "redis, -redis-pipelining: calls or pipelines in flight to a server at once (0: redisbucket.DefaultPipelineInFlight)")
	fs.IntVar(&f.pipeBatch, "redis-pipeline-batch", 0, "redis, -redis-pipelining: the most calls in one pipeline (0: redisbucket.DefaultPipelineMaxBatch)")
	fs.IntVar(&f.redisPool, "redis-pool", 0, "redis: connections per node (0: the client's default)")
	fs.BoolVar(&f.redisHealth, "redis-health-check", false, "redis: answer NOT_SERVING (gRPC health and /healthcheck) while Redis does not answer a PING (every master of a Cluster), checked every -redis-health-interval, as envoyproxy/ratelimit's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION does; off by default, for a service that fails open or falls back to local limits still answers while Redis is down")
	fs.DurationVar(&f.healthEvery, "redis-health-interval", 0, "redis, -redis-health-check: how often to PING Redis; a PING that takes longer, or more than 1s, fails (0: 1s)")
	fs.BoolVar(&f.shadow, "shadow", false, "global shadow mode: decide every request, answer OK")
	fs.BoolVar(&f.headers, "response-headers", false, "add the limit, remaining and reset headers of the descriptor closest to its limit")
	fs.StringVar(&f.headerNames.Limit, "header-limit", ratelimitsvc.DefaultHeaders.Limit, "the limit header's `name`")
	fs.StringVar(&f.headerNames.Remaining, "header-remaining", ratelimitsvc.DefaultHeaders.Remaining, "the remaining header's `name`")
	fs.StringVar(&f.headerNames.Reset, "header-reset", ratelimitsvc.DefaultHeaders.Reset, "the reset header's `name`")
	fs.IntVar(&f.maxDescriptors, "max-descriptors", ratelimitsvc.DefaultMaxDescriptors, "the most descriptors a request may hold")
	fs.IntVar(&f.maxEntries, "max-entries", ratelimitsvc.DefaultMaxEntries, "the most entries a descriptor may hold")
	fs.IntVar(&f.maxKeyBytes, "max-key-bytes", ratelimitsvc.DefaultMaxKeyBytes, "the longest a descriptor's key (domain, keys, values) may be")
	fs.IntVar(&f.maxRecvBytes, "max-request-bytes", 64<<10, "the largest gRPC request accepted")
	fs.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "how long calls in flight may take to finish at shutdown")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stdout, help)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return f, err
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(f.configs) == 0:
		return f, errors.New("-config is required")
	case f.backend != "memory" && f.backend != "redis":
		return f, fmt.Errorf("-backend %q: want memory or redis", f.backend)
	case f.backend == "redis" && len(f.redisAddrs) == 0:
		return f, errors.New("-backend redis needs -redis-addr")
	case f.backend == "redis" && f.maxKeyBytes > redisbucket.MaxKeyLen:
		return f, fmt.Errorf("-max-key-bytes %d is above Redis's store's %d", f.maxKeyBytes, redisbucket.MaxKeyLen)
	case f.fallbackNodes < 0:
		return f, fmt.Errorf("-redis-fallback-nodes %d is below 0", f.fallbackNodes)
	case f.fallbackNodes > 0 && f.redisFailure != "local":
		return f, fmt.Errorf("-redis-fallback-nodes %d needs -redis-failure local", f.fallbackNodes)
	case !f.pipelining && f.pipeInFlight != 0:
		return f, fmt.Errorf("-redis-pipeline-inflight %d needs -redis-pipelining", f.pipeInFlight)
	case !f.pipelining && f.pipeBatch != 0:
		return f, fmt.Errorf("-redis-pipeline-batch %d needs -redis-pipelining", f.pipeBatch)
	case f.redisHealth && f.backend != "redis":
		return f, errors.New("-redis-health-check needs -backend redis")
	case f.healthEvery < 0:
		return f, fmt.Errorf("-redis-health-interval %v is below 0", f.healthEvery)
	case !f.redisHealth && f.healthEvery != 0:
		return f, fmt.Errorf("-redis-health-interval %v needs -redis-health-check", f.healthEvery)
	case f.maxRecvBytes < 1:
		return f, fmt.Errorf("-max-request-bytes %d is below 1", f.maxRecvBytes)
	}
	return f, nil
}

// backend is what store builds: the store, the Service's options that go
// with it, a function that closes it, and for Redis one that PINGs it
// (every master of a Cluster), for -redis-health-check.
type backend struct {
	store keyrate.PolicyLimiter
	opts  []ratelimitsvc.Option
	close func()
	ping  func(context.Context) error
}

// store builds the backend.
func (f flags) store(metrics *keyrateprom.Metrics, logger *slog.Logger) (backend, error) {
	obs := keyrate.WithObserver(metrics)
	if f.backend == "memory" {
		var kopts []keyrate.Option
		if f.maxKeys > 0 {
			kopts = append(kopts, keyrate.WithMaxKeys(f.maxKeys))
		}
		s, clk, err := ratelimitsvc.NewLocalStore(append(kopts, obs)...)
		if err != nil {
			return backend{}, err
		}
		if err := metrics.Watch(s); err != nil {
			s.Close()
			return backend{}, err
		}
		return backend{store: s, opts: []ratelimitsvc.Option{ratelimitsvc.WithClock(clk)}, close: func() { s.Close() }}, nil
	}
	var client redis.UniversalClient
	if f.redisCluster {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: f.redisAddrs, ContextTimeoutEnabled: true, PoolSize: f.redisPool})
	} else {
		if len(f.redisAddrs) > 1 {
			return backend{}, errors.New("several -redis-addr need -redis-cluster")
		}
		client = redis.NewClient(&redis.Options{Addr: f.redisAddrs[0], ContextTimeoutEnabled: true, PoolSize: f.redisPool})
	}
	var fp redisbucket.FailurePolicy
	switch f.redisFailure {
	case "closed":
		fp = redisbucket.FailClosed
	case "open":
		fp = redisbucket.FailOpen
	case "local":
		fp = redisbucket.FallbackLocal
	default:
		client.Close()
		return backend{}, fmt.Errorf("-redis-failure %q: want closed, open or local", f.redisFailure)
	}
	// shared are the options a policy's validity depends on, given to
	// the scratch stores that check a config before a reload too.
	var shared []keyrate.Option
	if f.leaseSize > 0 {
		shared = append(shared, redisbucket.WithLeases(redisbucket.Lease{Size: f.leaseSize, Life: f.leaseLife}))
	}
	opts := append([]keyrate.Option{obs,
		redisbucket.WithPrefix(f.redisPrefix),
		redisbucket.WithTimeout(f.redisTimeout),
		redisbucket.WithFailurePolicy(fp),
		redisbucket.WithOnError(func(err error) { logger.Debug("redis", "error", err) }),
	}, shared...)
	if fp == redisbucket.FallbackLocal {
		// Each process's fallback is its own: divide the limits among
		// the fleet, counted through Redis while it answers, or at least
		// among -redis-fallback-nodes.
		opts = append(opts, redisbucket.WithNodeCount(redisbucket.NodeCount{}))
		if f.fallbackNodes > 0 {
			opts = append(opts, redisbucket.WithFallbackNodes(f.fallbackNodes))
		}
	}
	if f.redisDenyCache > 0 {
		opts = append(opts, redisbucket.WithDenyCache(f.redisDenyCache))
	}
	if f.breaker {
		opts = append(opts, redisbucket.WithBreaker(redisbucket.Breaker{}))
	}
	if f.pipelining {
		opts = append(opts, redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: f.pipeInFlight, MaxBatch: f.pipeBatch}))
	}
	s, err := redisbucket.New(client, keyrate.PerSecond(1), opts...)
	if err != nil {
		client.Close()
		return backend{}, err
	}
	if err := s.PolicyCheck(); err != nil {
		logger.Warn("redis maxmemory-policy not checked", "error", err)
	}
	validate := func(ps []keyrate.Policy) error {
		scratch, err := redisbucket.New(client, keyrate.PerSecond(1),
			append([]keyrate.Option{keyrate.WithPolicies(ps...), redisbucket.WithEvictionAllowed()}, shared...)...)
		if err != nil {
			return err
		}
		return scratch.Close()
	}
	ping := func(ctx context.Context) error { return client.Ping(ctx).Err() }
	if c, ok := client.(*redis.ClusterClient); ok {
		ping = func(ctx context.Context) error {
			return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		}
	}
	return backend{store: s, opts: []ratelimitsvc.Option{ratelimitsvc.WithValidate(validate)}, close: func() { s.Close(); client.Close() }, ping: ping}, nil
}

// watch is Service.Watch; a test replaces it to make the watcher fail.
var watch = (*ratelimitsvc.Service).Watch

// run is the command: it serves until SIGINT or SIGTERM arrives on sig,
// reloading on SIGHUP. ready, if not nil, is called with the listeners'
// addresses once they listen (for tests).
func run(args []string, stdout, stderr io.Writer, sig <-chan os.Signal, ready func(grpcAddr, metricsAddr string)) int {
	f, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := ratelimitsvc.LoadConfig(f.configs...)
	if err != nil {
		fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
		return 2
	}
	metrics := keyrateprom.New("rls")
	be, err := f.store(metrics, logger)
	if err != nil {
		fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
		return 2
	}
	defer be.close()
	store := be.store
	opts := append(be.opts, ratelimitsvc.WithLimits(f.maxDescriptors, f.maxEntries, f.maxKeyBytes))
	if f.shadow {
		opts = append(opts, ratelimitsvc.WithShadowMode())
	}
	if f.headers {
		opts = append(opts, ratelimitsvc.WithHeaders(f.headerNames))
	}
	svc, err := ratelimitsvc.New(store, cfg, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
		return 2
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, svc.Collector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	gl, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
		return 1
	}
	var ml net.Listener
	if f.metricsAddr != "" {
		if ml, err = net.Listen("tcp", f.metricsAddr); err != nil {
			gl.Close()
			fmt.Fprintf(stderr, "keyrate-rls: %v\n", err)
			return 1
		}
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(f.maxRecvBytes))
	svc.Register(srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	done := make(chan error, 2)
	go func() { done <- srv.Serve(gl) }()
	var hsrv *http.Server
	maddr := ""
	if ml != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, r *http.Request) {
			resp, err := hs.Check(r.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
				http.Error(w, "NOT_SERVING", http.StatusServiceUnavailable)
				return
			}
			io.WriteString(w, "OK\n")
		})
		hsrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hsrv.Serve(ml); !errors.Is(err, http.ErrServerClosed) {
				done <- err
			}
		}()
		maddr = ml.Addr().String()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var pinging chan struct{}
	if f.redisHealth {
		pinging = make(chan struct{})
		go func() {
			defer close(pinging)
			watchRedis(ctx, be.ping, cmp.Or(f.healthEvery, time.Second), hs, logger)
		}()
	}
	hup := make(chan struct{}, 1)
	watched := make(chan error, 1)
	report := func(err error) {
		if err != nil {
			logger.Error("config reload failed; the last good config stays", "error", err)
			return
		}
		logger.Info("config reloaded", "rules", len(svc.Config().Rules()), "domains", strings.Join(svc.Config().Domains(), ","))
	}
	go func() { watched <- watch(svc, ctx, f.configs, hup, report) }()
	logger.Info("keyrate-rls serving", "grpc", gl.Addr().String(), "metrics", maddr, "backend", f.backend,
		"rules", len(cfg.Rules()), "domains", strings.Join(cfg.Domains(), ","))
	if ready != nil {
		ready(gl.Addr().String(), maddr)
	}

	code := 0
loop:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				if watched == nil {
					// The watcher is gone: reload here. (While it runs,
					// it reloads, so that no two reloads overlap and an
					// older file never replaces a newer one.)
					report(svc.ReloadFiles(f.configs...))
					continue
				}
				select {
				case hup <- struct{}{}:
				default: // a reload is already due
				}
				continue
			}
			logger.Info("shutting down", "signal", s.String())
			break loop
		case err := <-done:
			logger.Error("server failed", "error", err)
			code = 1
			break loop
		case err := <-watched:
			if err != nil {
				logger.Error("cannot watch the config; reload with SIGHUP", "error", err)
			}
			watched = nil
			select {
			case <-hup: // a SIGHUP the watcher did not take
				report(svc.ReloadFiles(f.configs...))
			default:
			}
		}
	}
	cancel()
	if watched != nil {
		<-watched
	}
	if pinging != nil {
		<-pinging
	}
	hs.Shutdown() // NOT_SERVING: Envoy's health checks stop sending
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(f.grace):
		srv.Stop()
		<-stopped
	}
	if hsrv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), f.grace)
		_ = hsrv.Shutdown(sctx)
		scancel()
	}
	logger.Info("shut down")
	return code
}

// watchRedis PINGs Redis with ping every interval until ctx is done, and
// sets the health service's statuses (the server's and the rate-limit
// service's) to NOT_SERVING after a PING fails and back to SERVING after
// one succeeds, logging each change. A PING fails after the interval or
// 1s, whichever is longer.
func watchRedis(ctx context.Context, ping func(context.Context) error, every time.Duration, hs *health.Server, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	serving := true
	for {
		pctx, pcancel := context.WithTimeout(ctx, max(every, time.Second))
		err := ping(pctx)
		pcancel()
		if ctx.Err() != nil {
			return
		}
		if (err == nil) != serving {
			serving = err == nil
			status := healthpb.HealthCheckResponse_SERVING
			if serving {
				logger.Info("redis answers again: serving")
			} else {
				status = healthpb.HealthCheckResponse_NOT_SERVING
				logger.Warn("redis does not answer: not serving", "error", err)
			}
			hs.SetServingStatus("", status)
			hs.SetServingStatus(rlspb.RateLimitService_ServiceDesc.ServiceName, status)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
