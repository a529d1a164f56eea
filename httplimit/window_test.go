package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/httplimit"
	"github.com/keyrate/keyrate/mutexbucket"
)

// TestWindowHeaders checks the headers of a window algorithm's limit: the
// policy's quota is N per window W (not the 2W a sliding window takes to
// forget), and RateLimit's t and Retry-After are the decision's.
func TestWindowHeaders(t *testing.T) {
	for _, c := range []struct {
		alg           keyrate.Algorithm
		reset, policy string
		retry         string
	}{
		// 3 at 0:30; at 0:40 the fixed window resets at 1:00.
		{keyrate.FixedWindow, `"default";r=0;t=20`, `"default";q=3;w=60`, "20"},
		// The 4th fits when 3·(60−e) ≤ 2·60, at e = 20: 1:20 (a deny's t
		// is its retry).
		{keyrate.SlidingWindow, `"default";r=0;t=40`, `"default";q=3;w=60`, "40"},
	} {
		clk := clock.NewManual(0)
		limiter, err := mutexbucket.New(keyrate.PerMinute(3).Using(c.alg), keyrate.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		limit, err := httplimit.New(limiter)
		if err != nil {
			t.Fatal(err)
		}
		h := limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		clk.Set(30 * time.Second)
		for range 3 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
		clk.Set(40 * time.Second)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		got := [3]string{rec.Header().Get("RateLimit"), rec.Header().Get("RateLimit-Policy"), rec.Header().Get("Retry-After")}
		if rec.Code != http.StatusTooManyRequests || got[0] != c.reset || got[1] != c.policy || got[2] != c.retry {
			t.Errorf("%v: %d %q, want 429 %q %q %q", c.alg, rec.Code, got, c.reset, c.policy, c.retry)
		}
	}
}
