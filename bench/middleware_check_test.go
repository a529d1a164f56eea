package bench

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestMiddlewaresLimit runs BenchmarkMiddleware's setup check on every
// middleware: each refuses a client's 4th request under a limit of 3 an
// hour and still serves another client.
func TestMiddlewaresLimit(t *testing.T) {
	for _, mc := range middlewares {
		t.Run(mc.name, func(t *testing.T) {
			if err := checkLimits(mc); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCheckLimitsFails: the check fails a middleware that lets every
// request through, and one that counts every client's requests as one
// key's, as a benchmark measuring the wrong thing would.
func TestCheckLimitsFails(t *testing.T) {
	for _, c := range []struct {
		name string
		mc   middlewareCase
		want string
	}{
		{"no limit", middlewareCase{name: "open", new: func(_ int, next http.Handler) (http.Handler, func(), error) {
			return next, func() {}, nil
		}}, "request 4 of one client got status 200, want 429"},
		{"one key for all", middlewareCase{name: "global", new: func(n int, next http.Handler) (http.Handler, func(), error) {
			var served atomic.Int64
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if served.Add(1) > int64(n) {
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				next.ServeHTTP(w, r)
			}), func() {}, nil
		}}, "does not key by client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkLimits(c.mc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("checkLimits = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestCountName(t *testing.T) {
	for n, want := range map[int]string{1: "1", 1000: "1k", 4096: "4096", 100_000: "100k", 1_000_000: "1M", 2_500_000: "2500k"} {
		if got := countName(n); got != want {
			t.Errorf("countName(%d) = %q, want %q", n, got, want)
		}
		if got, err := parseCount(want); err != nil || got != n {
			t.Errorf("parseCount(%q) = %d, %v; want %d", want, got, err, n)
		}
	}
	for _, bad := range []string{"", "0", "-1k", "1.5M", "M", "k1", "9223372036854775807M"} {
		if n, err := parseCount(bad); err == nil {
			t.Errorf("parseCount(%q) = %d, want an error", bad, n)
		}
	}
}
