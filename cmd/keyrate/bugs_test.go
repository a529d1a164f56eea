package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestServeKeyFailureIsNotBackendError: a request the middleware cannot
// key (here ByIP behind a trusted proxy range, with a forwarding header
// that is not an address: httplimit.ErrBadAddress, answered 500) is not a
// store failure. keyrateprom counts every error it does not recognise as
// error="backend", documented as "a Redis error", so /metrics reported a
// backend failure for a bad header: an alert on backend errors would page
// for a misbehaving proxy or client. It must count under another kind
// (invalid_key, as a request without a key is), and backend must stay 0.
func TestServeKeyFailureIsNotBackendError(t *testing.T) {
	defer goleak.VerifyNone(t)
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
