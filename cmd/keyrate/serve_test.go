package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/leaktest"
)

func TestServeUsageErrors(t *testing.T) {
	tests := []struct {
		args    []string
		mention string
	}{
		{[]string{"-rate", "0"}, "Rate 0 is below 1"},
		{[]string{"-rate", "ten"}, `invalid value "ten" for flag -rate`},
		{[]string{"-per", "0s"}, "Per 0s is below 1ns"},
		{[]string{"-per", "soon"}, `invalid value "soon" for flag -per`},
		{[]string{"-burst", "-1"}, "Burst -1 is below 1"},
		{[]string{"-policies", "."}, "is a directory"},
		{[]string{"-store", "redis"}, "want mutex, striped or atomic"},
		{[]string{"-key", "cookie"}, "want ip or header:NAME"},
		{[]string{"-key", "header:"}, "want ip or header:NAME"},
		{[]string{"-key", "header:X API"}, `"X API"`},
		{[]string{"-trust", "10.0.0/8"}, `"10.0.0/8"`},
		{[]string{"-trust", "10.0.0.0/8", "-key", "header:X-API-Key"}, "-trust applies only to -key ip"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-tier-header", "X-Plan"}, "-tier-header needs -policies"},
		{[]string{"-policies", "/nonexistent-keyrate-dir/tiers.txt"}, "open /nonexistent-keyrate-dir/tiers.txt: no such file or directory"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := runServe(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") || !strings.HasPrefix(msg, "keyrate serve: ") {
				t.Errorf("stderr %q, want one line starting %q", msg, "keyrate serve: ")
			}
			if !strings.Contains(msg, tt.mention) {
				t.Errorf("stderr %q does not mention %s", msg, tt.mention)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestServeExplicitZeroBurst: -burst 0 on the command line is a bad value,
// as "burst 0" is in a policies file, not a silent request for the default
// (-rate). parseServe is called, not runServe, so that a broken parse
// cannot start a server.
func TestServeExplicitZeroBurst(t *testing.T) {
	for _, args := range [][]string{{"-burst", "0"}, {"-burst=0", "-rate", "5"}} {
		if c, err := parseServe(args, io.Discard); err == nil || !strings.Contains(err.Error(), "Burst 0 is below 1") {
			t.Errorf("%q: got %v (limit %v), want an error naming Burst 0 and the bound 1", args, err, c.limit)
		}
	}
	c, err := parseServe([]string{"-rate", "5"}, io.Discard)
	if err != nil || c.limit.Burst != 5 {
		t.Errorf("-rate 5 without -burst: burst %d (%v), want 5", c.limit.Burst, err)
	}
}

// TestServeTrustList: -trust takes a list as people write one, with
// spaces after the commas; an empty entry is still an error naming it.
// handler is called, not runServe, so that nothing listens.
func TestServeTrustList(t *testing.T) {
	for _, tt := range []struct {
		trust string
		ok    bool
	}{
		{"10.0.0.0/8,192.168.0.0/16", true},
		{"10.0.0.0/8, 192.168.0.0/16", true},
		{" 10.0.0.0/8 ,\t::1 ", true},
		{"10.0.0.0/8,", false},
		{"10.0.0.0/8,,::1", false},
	} {
		c, err := parseServe([]string{"-trust", tt.trust}, io.Discard)
		if err == nil {
			_, err = c.handler()
		}
		if (err == nil) != tt.ok {
			t.Errorf("-trust %q: error %v, want ok=%v", tt.trust, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `""`) {
			t.Errorf("-trust %q: error %q does not quote the empty entry", tt.trust, err)
		}
	}
}

func TestServeHelp(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := runServe([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	for _, want := range []string{"usage: keyrate serve", "-addr host:port", `(default "127.0.0.1:8080")`, "-store name",
		"-policies file", "-tier-header name", "NAME RATE PER [BURST]", "NAME unlimited"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("help does not contain %q:\n%s", want, stdout.String())
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q, want nothing", stderr.String())
	}
}

func TestServeDefaults(t *testing.T) {
	c, err := parseServe(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.describe(), "10 per 1s, burst 10, store atomic, key ip"; got != want {
		t.Errorf("defaults: %q, want %q", got, want)
	}
	if c.addr != "127.0.0.1:8080" {
		t.Errorf("default address %q, want 127.0.0.1:8080", c.addr)
	}
}

// get sends GET url with the header lines hdr (name, value...) and returns
// the status and response header.
func get(t *testing.T, client *http.Client, url string, hdr ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// getBody GETs url and returns the status code and the body.
func getBody(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// startServe serves c's handler on a free loopback port, on a frozen
// clock, and returns its URL, a client, and a function that shuts it down
// through its context and checks that it stopped.
func startServe(t *testing.T, c serveConfig) (string, *http.Client, func()) {
	t.Helper()
	// A frozen clock: the headers are exact whatever the time between
	// requests on a busy machine.
	c.clock = clock.NewManual(0)
	handler, err := c.handler()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, handler) }()
	tr := &http.Transport{}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	return url, client, func() {
		t.Helper()
		tr.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v after cancel, want nil", err)
		}
		if _, err := client.Get(url); err == nil {
			t.Errorf("GET after shutdown succeeded, want a refused connection")
		}
	}
}

// TestServe runs the server on loopback for each store and key source, and
// shuts it down through its context.
func TestServe(t *testing.T) {
	defer leaktest.Verify(t)
	for _, args := range [][]string{
		{"-rate", "2", "-per", "1m", "-store", "mutex"},
		{"-rate", "2", "-per", "1m", "-store", "striped", "-legacy"},
		{"-rate", "2", "-per", "1m", "-key", "header:X-API-Key"},
		{"-rate", "2", "-per", "1m", "-trust", "127.0.0.0/8"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c, err := parseServe(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			url, client, stop := startServe(t, c)
			defer stop()

			var hdr []string
			if c.key.header != "" {
				if code, _ := get(t, client, url); code != 400 {
					t.Errorf("request without the key header: status %d, want 400", code)
				}
				hdr = []string{"X-API-Key", "alice"}
			}
			if c.trust != "" {
				hdr = []string{"X-Forwarded-For", "203.0.113.9"}
			}
			for i, want := range []string{`"default";r=1;t=30`, `"default";r=0;t=60`} {
				code, h := get(t, client, url, hdr...)
				if code != 200 || h.Get("RateLimit") != want || h.Get("RateLimit-Policy") != `"default";q=2;w=60` {
					t.Errorf("request %d: %d RateLimit-Policy %q RateLimit %q, want 200 with %q",
						i, code, h.Get("RateLimit-Policy"), h.Get("RateLimit"), want)
				}
			}
			code, h := get(t, client, url, hdr...)
			if code != 429 || h.Get("Retry-After") != "30" {
				t.Errorf("third request: %d with Retry-After %q, want 429 with 30", code, h.Get("Retry-After"))
			}
			if got, want := h.Get("X-RateLimit-Remaining"), map[bool]string{true: "0"}[c.legacy]; got != want {
				t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
			}
			if c.trust != "" { // another forwarded client has its own bucket
				if code, _ := get(t, client, url, "X-Forwarded-For", "203.0.113.10"); code != 200 {
					t.Errorf("second forwarded client: status %d, want 200", code)
				}
			}

			// /metrics is served beside the limited handler, is not
			// limited itself, and counts what happened above.
			keys, allowed, noKey := "1", "2", "0"
			if c.trust != "" {
				keys, allowed = "2", "3"
			}
			if c.key.header != "" {
				noKey = "1"
			}
			for range 3 {
				code, body := getBody(t, client, url+"metrics")
				if code != 200 {
					t.Fatalf("GET /metrics: status %d", code)
				}
				for _, line := range []string{
					`keyrate_decisions_total{decision="allowed",policy="default",store="serve"} ` + allowed,
					`keyrate_decisions_total{decision="denied",policy="default",store="serve"} 1`,
					`keyrate_errors_total{error="invalid_key",policy="default",store="serve"} ` + noKey,
					`keyrate_keys{store="serve"} ` + keys,
				} {
					if !slices.Contains(strings.Split(body, "\n"), line) {
						t.Errorf("GET /metrics lacks the line %q; it has:\n%s", line, body)
					}
				}
			}
		})
	}
}

// writeFile writes content to a file name in a fresh temporary directory
// and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tiersFile is the policies file of the tier tests.
const tiersFile = `# name rate per burst
pro  2 1s
pro  5 1m
ops  unlimited
`

// TestServeTiers runs the server with a policies file and the tier from a
// header, for each store: each tier's fields, the default for a request
// naming none or an unknown one, and none under an unlimited tier.
func TestServeTiers(t *testing.T) {
	defer leaktest.Verify(t)
	path := writeFile(t, "tiers.txt", tiersFile)
	for _, store := range []string{"mutex", "striped", "atomic"} {
		t.Run("store="+store, func(t *testing.T) {
			args := []string{"-rate", "2", "-per", "1m", "-store", store, "-key", "header:X-API-Key", "-policies", path, "-tier-header", "X-Plan"}
			c, err := parseServe(args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.describe(), "2 per 1m0s, burst 2, store "+store+", key header:X-API-Key, tiers pro, ops by header X-Plan"; got != want {
				t.Errorf("describe: %q, want %q", got, want)
			}
			url, client, stop := startServe(t, c)
			defer stop()
			const pro, def = `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"default";q=2;w=60`
			for i, s := range []struct {
				key, tier                string
				status                   int
				policy, rateLimit, retry string
			}{
				{"alice", "pro", 200, pro, `"pro-0";r=1;t=1`, ""},
				{"alice", "pro", 200, pro, `"pro-0";r=0;t=1`, ""},
				{"alice", "pro", 429, pro, `"pro-0";r=0;t=1`, "1"},
				{"bob", "", 200, def, `"default";r=1;t=30`, ""},
				{"carol", "gold", 200, def, `"default";r=1;t=30`, ""}, // unknown: the default
				{"dave", "ops", 200, "", "", ""},
				{"dave", "ops", 200, "", "", ""},
				{"dave", "ops", 200, "", "", ""},
			} {
				hdr := []string{"X-API-Key", s.key}
				if s.tier != "" {
					hdr = append(hdr, "X-Plan", s.tier)
				}
				code, h := get(t, client, url, hdr...)
				if code != s.status || h.Get("RateLimit-Policy") != s.policy || h.Get("RateLimit") != s.rateLimit || h.Get("Retry-After") != s.retry {
					t.Errorf("request %d (%s, tier %q): %d RateLimit-Policy %q RateLimit %q Retry-After %q, want %d %q %q %q",
						i, s.key, s.tier, code, h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"),
						s.status, s.policy, s.rateLimit, s.retry)
				}
			}
		})
	}
}

// TestServeDefaultPolicyFile: a file may replace the default policy, here
// with two windows and no tiers.
func TestServeDefaultPolicyFile(t *testing.T) {
	defer leaktest.Verify(t)
	path := writeFile(t, "tiers.txt", "default 1 1s\ndefault 3 1m\n")
	c, err := parseServe([]string{"-policies", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.describe(), `"default": 1 per 1s, burst 1; 3 per 1m0s, burst 3, store atomic, key ip`; got != want {
		t.Errorf("describe: %q, want %q", got, want)
	}
	url, client, stop := startServe(t, c)
	defer stop()
	code, h := get(t, client, url)
	if code != 200 || h.Get("RateLimit-Policy") != `"default-0";q=1;w=1, "default-1";q=3;w=60` || h.Get("RateLimit") != `"default-0";r=0;t=1` {
		t.Errorf("%d RateLimit-Policy %q RateLimit %q", code, h.Get("RateLimit-Policy"), h.Get("RateLimit"))
	}
}

// TestServePolicyErrors: a bad policies file, or flags that do not fit it,
// is one line on stderr and exit status 2.
func TestServePolicyErrors(t *testing.T) {
	good := writeFile(t, "good.txt", tiersFile)
	bad := writeFile(t, "bad.txt", "pro 2 1s\npro ten 1m\n")
	withDefault := writeFile(t, "default.txt", "# the default\ndefault 5 1s\npro 10 1s\n")
	empty := writeFile(t, "empty.txt", "\n# nothing\n")
	tests := []struct {
		args    []string
		mention string
	}{
		{[]string{"-policies", bad, "-tier-header", "X-Plan"}, bad + `:2: rate "ten" is not a whole number`},
		{[]string{"-policies", empty}, empty + ": no policies"},
		{[]string{"-policies", good}, good + " defines pro, ops, which only -tier-header can select"},
		{[]string{"-policies", withDefault, "-rate", "3", "-burst", "4", "-tier-header", "X-Plan"}, withDefault + ":2 defines the default policy, which -rate, -per and -burst would set: drop -burst, -rate"},
		{[]string{"-policies", good, "-tier-header", "X Plan"}, `httplimit.TierByHeader("X Plan"): not a valid header field name`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := runServe(tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") || !strings.HasPrefix(msg, "keyrate serve: ") {
				t.Errorf("stderr %q, want one line starting %q", msg, "keyrate serve: ")
			}
			if !strings.Contains(msg, tt.mention) {
				t.Errorf("stderr %q does not mention %s", msg, tt.mention)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestRunServeSignal runs the whole command on a free loopback port, reads
// the address from its start-up line, and stops it with SIGTERM: it must
// shut down and exit 0.
func TestRunServeSignal(t *testing.T) {
	defer leaktest.Verify(t)
	pr, pw := io.Pipe()
	var stderr strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- runServe([]string{"-addr", "127.0.0.1:0", "-rate", "5"}, pw, &stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("no start-up line; stderr %q", stderr.String())
	}
	first := lines.Text()
	addr, ok := strings.CutPrefix(first, "keyrate serve: listening on http://")
	if !ok {
		t.Fatalf("start-up line %q, want it to give the address", first)
	}
	addr, _, _ = strings.Cut(addr, " ")
	tr := &http.Transport{}
	if code, _ := get(t, &http.Client{Transport: tr}, "http://"+addr+"/"); code != 200 {
		t.Errorf("status %d, want 200", code)
	}
	tr.CloseIdleConnections()

	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sending SIGTERM to the test process: %v", err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit status %d after SIGTERM, want 0; stderr %q", c, stderr.String())
		}
	case <-time.After(30 * time.Second): // a guard against a hang, not a wait for time
		t.Fatal("runServe did not return after SIGTERM")
	}
	if len(rest) != 1 || rest[0] != "keyrate serve: shut down" {
		t.Errorf("output after the start-up line %q, want one shut-down line", rest)
	}
}

// TestServeTimeouts: the server bounds how long a client may take to send
// a request and how long an idle connection stays open; without them a
// client that opens connections and sends nothing holds each for ever.
func TestServeTimeouts(t *testing.T) {
	srv := newServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout,
		"ReadTimeout":       srv.ReadTimeout,
		"IdleTimeout":       srv.IdleTimeout,
	} {
		if d <= 0 || d > 5*time.Minute {
			t.Errorf("%s = %v, want a bound of at most 5m", name, d)
		}
	}
}
