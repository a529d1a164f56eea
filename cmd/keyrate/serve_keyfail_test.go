package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/keyrate/keyrate/internal/leaktest"
)

// TestServeKeyFailureIsNotBackendError: a request the middleware cannot
// key (here ByIP behind a trusted proxy range, with a forwarding header
// that is not an address: httplimit.ErrBadAddress, answered 500) is not a
// store failure: /metrics counts it under error="invalid_key", as a
// request without a key, and error="backend" (a Redis error) stays 0, so
// that an alert on backend errors does not page for a misbehaving proxy or
// client.
func TestServeKeyFailureIsNotBackendError(t *testing.T) {
	defer leaktest.Verify(t)
	c, err := parseServe([]string{"-trust", "127.0.0.0/8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	url, client, stop := startServe(t, c)
	defer stop()
	if code, _ := get(t, client, url, "X-Forwarded-For", "not-an-address"); code != 500 {
		t.Fatalf("status %d, want 500", code)
	}
	lines := metricLines(t, client, url)
	if want := `keyrate_errors_total{error="backend",policy="default",store="serve"} 0`; !slices.Contains(lines, want) {
		var errs []string
		for _, l := range lines {
			if strings.HasPrefix(l, "keyrate_errors_total{") {
				errs = append(errs, l)
			}
		}
		t.Errorf("a bad forwarding header counted as a backend error; want %q, got\n%s", want, strings.Join(errs, "\n"))
	}
}
