package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keyrate/keyrate/clock"
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
		{[]string{"-store", "redis"}, "want mutex, striped or atomic"},
		{[]string{"-key", "cookie"}, "want ip or header:NAME"},
		{[]string{"-key", "header:"}, "want ip or header:NAME"},
		{[]string{"-key", "header:X API"}, `"X API"`},
		{[]string{"-trust", "10.0.0/8"}, `"10.0.0/8"`},
		{[]string{"-trust", "10.0.0.0/8", "-key", "header:X-API-Key"}, "-trust applies only to -key ip"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
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

func TestServeHelp(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := runServe([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	for _, want := range []string{"usage: keyrate serve", "-addr host:port", `(default "127.0.0.1:8080")`, "-store name"} {
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

// TestServe runs the server on loopback for each store and key source, and
// shuts it down through its context.
func TestServe(t *testing.T) {
	defer goleak.VerifyNone(t)
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
			// A frozen clock: the headers below are exact whatever the
			// time between requests on a busy machine.
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

			var hdr []string
			if c.key.header != "" {
				if code, _ := get(t, client, url); code != 500 {
					t.Errorf("request without the key header: status %d, want 500", code)
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

			tr.CloseIdleConnections()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve returned %v after cancel, want nil", err)
			}
			if _, err := client.Get(url); err == nil {
				t.Errorf("GET after shutdown succeeded, want a refused connection")
			}
		})
	}
}

// TestRunServeSignal runs the whole command on a free loopback port, reads
// the address from its start-up line, and stops it with SIGTERM: it must
// shut down and exit 0.
func TestRunServeSignal(t *testing.T) {
	defer goleak.VerifyNone(t)
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
