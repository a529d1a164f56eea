package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// TestOneAllocation: for a known key the middleware adds one allocation
// to a request, allowed or denied, with the legacy fields or in shadow
// mode; and the values it wrote for one response are not changed by the
// next (they share no bytes).
func TestOneAllocation(t *testing.T) {
	for _, c := range []struct {
		name  string
		burst int // 1: every request after the first is denied
		opts  []Option
	}{
		{"allowed", 1_000_000, nil},
		{"allowed/legacy", 1_000_000, []Option{WithLegacyHeaders()}},
		{"denied", 1, nil},
		{"denied/legacy", 1, []Option{WithLegacyHeaders()}},
		{"denied/shadow", 1, []Option{WithShadow(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(0)
			lim, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: c.burst}, keyrate.WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			// A denied handler that only writes the status: DefaultDenied's
			// body and headers are its own allocations, not the middleware's.
			opts := append([]Option{WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ keyrate.Decision) { w.WriteHeader(429) })}, c.opts...)
			mw, err := New(lim, opts...)
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
			r := httptest.NewRequest("GET", "/", nil)
			first := &benchWriter{h: make(http.Header)}
			h.ServeHTTP(first, r) // creates the key and the cached fields
			kept := first.h.Clone()
			w := &benchWriter{h: make(http.Header)}
			n := testing.AllocsPerRun(100, func() {
				clk.Advance(time.Second) // the values change from one request to the next
				clear(w.h)
				h.ServeHTTP(w, r)
				if len(w.h["Ratelimit"]) != 1 {
					t.Fatalf("status %d, header %v; want RateLimit", w.code, w.h)
				}
			})
			if n > 1 {
				t.Errorf("%v allocations a request, want at most 1", n)
			}
			for name, v := range kept {
				if got := first.h[name]; len(got) != 1 || got[0] != v[0] {
					t.Errorf("the first response's %s changed from %q to %q", name, v, got)
				}
			}
			if got := w.h.Get("RateLimit"); got == first.h.Get("RateLimit") {
				t.Errorf("RateLimit %q did not change over 101 requests a second apart", got)
			}
		})
	}
}
