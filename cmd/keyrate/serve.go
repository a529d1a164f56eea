package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/httplimit"
	"github.com/keyrate/keyrate/keyrateprom"
)

func init() {
	commands["serve"] = command{
		run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return runServe(args, stdout, stderr)
		},
		summary: "run a rate-limited HTTP server on loopback, to try keyrate with curl",
	}
}

// serveHelp is the text of "keyrate serve -h", before the flag list.
const serveHelp = `usage: keyrate serve [flags]

Serve runs an HTTP server that answers every request with "ok" behind
keyrate's httplimit middleware, until it gets SIGINT or SIGTERM, then shuts
down gracefully. Try it with

	keyrate serve -rate 3 -per 1m &
	curl -i http://127.0.0.1:8080/

An allowed request gets 200 with RateLimit-Policy and RateLimit header
fields; past the limit, 429 Too Many Requests with Retry-After. GET
/metrics, which is not rate-limited, answers Prometheus metrics: the
decisions per policy, requests without a key, and the keys the store
tracks (see the keyrateprom module). Bad flags
print one line on stderr and exit with status 2; a server that cannot
start exits with status 1.

With -policies FILE and -tier-header NAME, each request is decided under
the policy (tier) its NAME header names, such as a client's plan:

	keyrate serve -policies tiers.txt -tier-header X-Plan &
	curl -i -H 'X-Plan: pro' http://127.0.0.1:8080/

A request without the header, or naming a tier the file lacks, gets the
default policy. A client has one bucket whatever its tier: one that
changes tier owes the new tier what it has spent and not yet refilled,
counted as spent at the change, and refills at the new tier's rates. (A
real deployment would take the tier from a gateway that authenticates the
client, never from the client itself.)

` + policiesHelp + `
Flags:
`

// shutdownGrace is how long serve waits for requests in flight after a
// signal before it closes their connections.
const shutdownGrace = 5 * time.Second

// serveConfig is what the serve flags resolve to.
type serveConfig struct {
	addr   string
	limit  keyrate.Limit
	store  storeFlag
	key    keyFlag
	trust  string // comma-separated CIDR ranges, for -key ip
	legacy bool
	clock  clock.Clock // the store's clock; nil is clock.System(), as from the command line
	// policies is the file -policies read, nil without one; tierHeader
	// names the header that picks a request's policy, "" for none.
	policies   *policyFile
	tierHeader string
}

// keyFlag is the value of -key: "ip", or "header:NAME".
type keyFlag struct{ header string }

func (f *keyFlag) String() string {
	if f.header == "" {
		return "ip"
	}
	return "header:" + f.header
}

func (f *keyFlag) Set(s string) error {
	if s == "ip" {
		f.header = ""
		return nil
	}
	if name, ok := strings.CutPrefix(s, "header:"); ok && name != "" {
		f.header = name
		return nil
	}
	return errors.New("want ip or header:NAME")
}

// parseServe parses the serve flags. It returns flag.ErrHelp, with the
// help written to stdout, for -h; any other error is a one-line usage
// error.
func parseServe(args []string, stdout io.Writer) (serveConfig, error) {
	var c serveConfig
	if err := c.store.Set("atomic"); err != nil {
		return c, err
	}
	fs := flag.NewFlagSet("keyrate serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "the `host:port` to listen on")
	fs.IntVar(&c.limit.Rate, "rate", 10, "tokens added every -per (at least 1)")
	fs.DurationVar(&c.limit.Per, "per", time.Second, "the `period` over which -rate tokens are added")
	fs.IntVar(&c.limit.Burst, "burst", 0, "the bucket's capacity (default: -rate)")
	fs.Var(&c.store, "store", "the `name` of the store: mutex, striped or atomic")
	fs.Var(&c.key, "key", "what keys a request: `ip` (the client address) or header:NAME (e.g. header:X-API-Key)")
	fs.StringVar(&c.trust, "trust", "", "comma-separated `CIDRs` (or IPs) of proxies whose X-Forwarded-For is honoured (with -key ip)")
	fs.BoolVar(&c.legacy, "legacy", false, "also send X-RateLimit-Limit, -Remaining and -Reset")
	policies := fs.String("policies", "", "a `file` of named policies (tiers), one window per line (see above)")
	fs.StringVar(&c.tierHeader, "tier-header", "", "the request header `name` whose value picks the policy, e.g. X-Plan (with -policies)")
	if err := parseFlags(fs, args, serveHelp, stdout); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	burstSet := false
	fs.Visit(func(fl *flag.Flag) { burstSet = burstSet || fl.Name == "burst" })
	if !burstSet { // a -burst 0 given is a bad value, not the default
		c.limit.Burst = c.limit.Rate
	}
	if c.trust != "" && c.key.header != "" {
		return c, errors.New("-trust applies only to -key ip")
	}
	if err := c.limit.Validate(); err != nil {
		return c, err
	}
	if *policies == "" {
		if c.tierHeader != "" {
			return c, errors.New("-tier-header needs -policies")
		}
		return c, nil
	}
	f, err := readPolicies(*policies)
	if err != nil {
		return c, err
	}
	if i := f.find(keyrate.DefaultPolicy); i >= 0 {
		var set []string
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "rate" || fl.Name == "per" || fl.Name == "burst" {
				set = append(set, "-"+fl.Name)
			}
		})
		if len(set) > 0 {
			return c, fmt.Errorf("%s:%d defines the default policy, which -rate, -per and -burst would set: drop %s", f.name, f.lines[i], strings.Join(set, ", "))
		}
	}
	if names := f.names(); names != "" && c.tierHeader == "" {
		return c, fmt.Errorf("%s defines %s, which only -tier-header can select", f.name, names)
	}
	c.policies = f
	return c, nil
}

// handler returns the server's handler: "ok" behind the middleware, with
// the store, key, limit and policies of c. Its error is a usage error.
func (c serveConfig) handler() (http.Handler, error) {
	kopts := []keyrate.Option{keyrate.WithClock(c.clock)}
	if c.policies != nil {
		kopts = append(kopts, keyrate.WithPolicies(c.policies.policies...))
	}
	limiter, err := replayStores[c.store].new(c.limit, kopts...)
	if err != nil {
		return nil, err
	}
	opts := []httplimit.Option{httplimit.ByIP()}
	if c.trust != "" {
		cidrs := strings.Split(c.trust, ",")
		for i := range cidrs { // "a, b" is how people write a list
			cidrs[i] = strings.TrimSpace(cidrs[i])
		}
		opts[0] = httplimit.ByIP(httplimit.TrustProxies(cidrs...))
	}
	if c.key.header != "" {
		opts[0] = httplimit.ByHeader(c.key.header)
	}
	if c.legacy {
		opts = append(opts, httplimit.WithLegacyHeaders())
	}
	if c.tierHeader != "" {
		opts = append(opts, httplimit.TierByHeader(c.tierHeader))
	}
	// The middleware, not the store, reports to the metrics: it also
	// knows of requests without a key.
	metrics := keyrateprom.New("serve")
	if st, ok := limiter.(keyrateprom.Stater); ok {
		if err := metrics.Watch(st); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(metrics); err != nil {
		return nil, err
	}
	opts = append(opts, httplimit.WithObserver(metrics))
	mw, err := httplimit.New(limiter, opts...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})))
	return mux, nil
}

// describe returns a one-line summary of c for the start-up message.
func (c serveConfig) describe() string {
	limit := c.limit.String()
	if c.policies != nil {
		if i := c.policies.find(keyrate.DefaultPolicy); i >= 0 {
			limit = c.policies.policies[i].String()
		}
	}
	s := fmt.Sprintf("%s, store %v, key %v", limit, &c.store, &c.key)
	if names := c.policies.names(); names != "" {
		s += fmt.Sprintf(", tiers %s by header %s", names, c.tierHeader)
	}
	return s
}

// newServer returns the server serve runs h on. A client gets 10 seconds
// to send a request (serve's handlers read no body), and an idle
// connection is closed after 2 minutes, so that slow or idle clients
// cannot hold connections open for ever.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// serve serves h on ln until ctx is done, then shuts down: it stops
// accepting, waits up to shutdownGrace for requests in flight, and closes
// the rest. It returns nil after a shutdown that ctx asked for.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := newServer(h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done: // Serve failed by itself
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// runServe is the serve subcommand: it runs until SIGINT or SIGTERM and
// returns 0 after a graceful shutdown, 2 for a usage error, and 1 if the
// server cannot start or fails.
func runServe(args []string, stdout, stderr io.Writer) int {
	c, err := parseServe(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		var h http.Handler
		if h, err = c.handler(); err == nil {
			return listenAndServe(c, h, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "keyrate serve: %v\n", err)
	return 2
}

// listenAndServe serves h on c.addr until SIGINT or SIGTERM.
func listenAndServe(c serveConfig, h http.Handler, stdout, stderr io.Writer) int {
	// Catch the signals before the server is announced, so that a signal
	// sent on seeing the announcement is never the default (fatal) one.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		fmt.Fprintf(stderr, "keyrate serve: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "keyrate serve: listening on http://%s (%s); stop with Ctrl-C\n", ln.Addr(), c.describe())
	if err := serve(ctx, ln, h); err != nil {
		fmt.Fprintf(stderr, "keyrate serve: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "keyrate serve: shut down")
	return 0
}
