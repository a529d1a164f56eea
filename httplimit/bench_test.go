package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/racetest"
)

// benchWriter is a ResponseWriter that keeps only the status, so that the
// benchmark measures the handler rather than a recorder.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// benchKeys is the number of client addresses the benchmark spreads
// goroutines over, all created before timing starts.
const benchKeys = 256

// benchRequest returns a GET from client address i.
func benchRequest(i int) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":40000"
	return r
}

// BenchmarkMiddleware measures what the middleware adds to a trivial
// handler: mw=none is the handler alone, mw=keyrate the default middleware
// (key by IP, RateLimit-Policy and RateLimit set) over atomicbucket on the
// system clock, mw=keyrate-legacy the same with the X-RateLimit fields,
// mw=keyrate-tier the default middleware with the tier from a header
// naming a two-window policy, and mw=keyrate-tier-refunds that with
// WithRefunds. Each goroutine uses its own existing key, and the limit is
// never reached. Besides ns/op it reports cpu-ns/op, the process's CPU
// time per request.
func BenchmarkMiddleware(b *testing.B) {
	racetest.Bench()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	limit := keyrate.Limit{Rate: 1_000_000_000, Per: time.Second, Burst: 1_000_000}
	tier := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{limit, limit.WithBurst(2_000_000)}}
	build := func(opts ...Option) http.Handler {
		lim, err := atomicbucket.New(limit, keyrate.WithPolicies(tier))
		if err != nil {
			b.Fatal(err)
		}
		mw, err := New(lim, opts...)
		if err != nil {
			b.Fatal(err)
		}
		h := mw(ok)
		for i := range benchKeys {
			r := benchRequest(i)
			r.Header.Set("X-Plan", tier.Name)
			h.ServeHTTP(&benchWriter{h: make(http.Header)}, r)
		}
		if n := lim.Len(); n != benchKeys {
			b.Fatalf("setup created %d keys, want %d", n, benchKeys)
		}
		return h
	}
	for _, bc := range []struct {
		name   string
		h      http.Handler
		header string // a field every response must carry
	}{
		{"none", ok, ""},
		{"keyrate", build(), "Ratelimit"},
		{"keyrate-legacy", build(WithLegacyHeaders()), "X-Ratelimit-Remaining"},
		{"keyrate-tier", build(TierByHeader("X-Plan")), "Ratelimit"},
		{"keyrate-tier-refunds", build(TierByHeader("X-Plan"), WithRefunds()), "Ratelimit"},
	} {
		b.Run("mw="+bc.name, func(b *testing.B) {
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				// Keys 17 apart: their buckets were allocated 17 words
				// apart, so goroutines do not share a cache line.
				r := benchRequest(int(next.Add(1)-1) * 17 % benchKeys)
				r.Header.Set("X-Plan", tier.Name) // read only by the tier cases
				w := &benchWriter{h: make(http.Header)}
				ran := false
				for pb.Next() {
					clear(w.h)
					bc.h.ServeHTTP(w, r)
					ran = true
				}
				if ran && (w.code != http.StatusOK || bc.header != "" && len(w.h[bc.header]) != 1) {
					b.Errorf("last response: status %d, header %v; want 200 with %s", w.code, w.h, bc.header)
				}
			})
			// CPU time per request, all threads and the GC included: on a
			// loaded machine it is steadier than wall time per op, which
			// counts time the benchmark was not running.
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
