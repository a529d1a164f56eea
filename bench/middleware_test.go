package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	chirate "github.com/go-chi/httprate"
	golimiter "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/httplimit"
	"github.com/keyrate/keyrate/internal/racetest"
)

// A middlewareCase is one mw= value: a rate-limiting net/http middleware
// built as its documentation shows, keyed by the client's IP address from
// RemoteAddr, under a limit of n requests an hour per client.
type middlewareCase struct {
	name string
	// new wraps next in the middleware under a limit of n requests an hour
	// per client, and returns a function that releases what it holds.
	new func(n int, next http.Handler) (http.Handler, func(), error)
}

// middlewares is every mw= value, httplimit first: the one the others are
// compared with.
var middlewares = []middlewareCase{
	{name: "httplimit", new: newHTTPLimit},
	{name: "httprate", new: newHTTPRate},
	{name: "go-limiter", new: newGoLimiter},
	{name: "tollbooth", new: newTollbooth},
}

// newHTTPLimit is keyrate's httplimit over atomicbucket, as New builds it:
// the key is the client IP (ByIP, no proxy trusted), the RateLimit-Policy
// and RateLimit fields are set, a denial is DefaultDenied's 429.
func newHTTPLimit(n int, next http.Handler) (http.Handler, func(), error) {
	lim, err := atomicbucket.New(keyrate.PerHour(n))
	if err != nil {
		return nil, nil, err
	}
	mw, err := httplimit.New(lim)
	if err != nil {
		return nil, nil, err
	}
	return mw(next), func() { lim.Close() }, nil
}

// newHTTPRate is github.com/go-chi/httprate with its in-memory counter (a
// sliding window of an hour), keyed by httprate.KeyByIP (RemoteAddr): it
// sets X-RateLimit-Limit, -Remaining and -Reset, and a denial is
// http.Error's 429.
func newHTTPRate(n int, next http.Handler) (http.Handler, func(), error) {
	return chirate.LimitBy(n, time.Hour, chirate.KeyByIP)(next), func() {}, nil
}

// newGoLimiter is github.com/sethvargo/go-limiter's httplimit over its
// memorystore (n tokens an interval of an hour), keyed by IPKeyFunc()
// (RemoteAddr): it sets X-RateLimit-Limit, -Remaining and -Reset, and a
// denial is http.Error's 429 with Retry-After. Closing the store stops
// its sweeper.
func newGoLimiter(n int, next http.Handler) (http.Handler, func(), error) {
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(n), Interval: time.Hour})
	if err != nil {
		return nil, nil, err
	}
	mw, err := golimiter.NewMiddleware(store, golimiter.IPKeyFunc())
	if err != nil {
		return nil, nil, err
	}
	return mw.Handle(next), func() { store.Close(context.Background()) }, nil
}

// newTollbooth is github.com/didip/tollbooth (v7, an x/time/rate limiter
// per key in an expirable cache) at n an hour with a burst of n, keyed by
// RemoteAddr alone: its default looks at X-Forwarded-For and X-Real-IP
// first, which a client can set, and adds the URL path to the key. It sets
// its X-Rate-Limit-* and RateLimit-* fields; a denial is its 429 message.
func newTollbooth(n int, next http.Handler) (http.Handler, func(), error) {
	lmt := tollbooth.NewLimiter(float64(n)/time.Hour.Seconds(), nil)
	lmt.SetBurst(n).SetIPLookups([]string{"RemoteAddr"}).SetIgnoreURL(true)
	return tollbooth.LimitHandler(lmt, next), func() {}, nil
}

// An outcome is one outcome= value: the limit the middleware runs under
// and the status every measured request must get.
type outcome struct {
	name   string
	limit  int // requests an hour per client
	status int
}

// outcomes: allowed runs under a billion requests an hour, never reached;
// denied under one an hour, which setup spends for every client, so that
// every measured request is refused.
var outcomes = []outcome{
	{name: "allowed", limit: 1_000_000_000, status: http.StatusOK},
	{name: "denied", limit: 1, status: http.StatusTooManyRequests},
}

// middlewareClients is the number of client addresses (keys=1k).
const middlewareClients = 1_000

// benchWriter is a ResponseWriter that keeps the header and the status
// only, so that the benchmark measures the middleware, not a recorder.
type benchWriter struct {
	h    http.Header
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }

// clientRequest returns a GET from client i (10.<i>:40000, one address per
// i below 2¹⁶).
func clientRequest(i int) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&0xff) + ":40000"
	return r
}

// okHandler is the trivial handler every middleware wraps.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// serve sends r to h and returns the status.
func serve(h http.Handler, r *http.Request) int {
	w := &benchWriter{h: make(http.Header)}
	h.ServeHTTP(w, r)
	return w.code
}

// checkLimits checks that mc limits each client on its own: under a limit
// of 3 an hour, a client's first 3 requests are served and its 4th, sent
// at once, gets 429 Too Many Requests, while another client is still
// served. A middleware that keyed every request alike, or let all through,
// would fail it.
func checkLimits(mc middlewareCase) error {
	const n = 3
	h, release, err := mc.new(n, okHandler)
	if err != nil {
		return err
	}
	defer release()
	a, other := clientRequest(1), clientRequest(2)
	for i := range n + 1 {
		want := http.StatusOK
		if i == n {
			want = http.StatusTooManyRequests
		}
		if got := serve(h, a); got != want {
			return fmt.Errorf("under a limit of %d an hour, request %d of one client got status %d, want %d", n, i+1, got, want)
		}
	}
	if got := serve(h, other); got != http.StatusOK {
		return fmt.Errorf("a second client's first request got status %d after the first client was limited, want 200: the middleware does not key by client", got)
	}
	return nil
}

// mwFixture is a middleware prepared for one sub-benchmark, kept across
// the calls the testing package makes for its runs and core counts (see
// fixtureFor): every client has sent one request, and under the denied
// outcome has been refused once.
var mwFixture struct {
	name    string
	h       http.Handler
	release func()
	reqs    []*http.Request // one per client
	seq     []int           // client indexes in call order; power-of-two length
}

// middlewareFor returns the prepared middleware for the running
// sub-benchmark, building it if the last one was for another.
func middlewareFor(b *testing.B, mc middlewareCase, oc outcome) {
	if mwFixture.name == b.Name() {
		return
	}
	if mwFixture.release != nil {
		mwFixture.release()
	}
	mwFixture.name, mwFixture.h, mwFixture.release = "", nil, nil
	if err := checkLimits(mc); err != nil {
		b.Fatalf("mw=%s: %v", mc.name, err)
	}
	h, release, err := mc.new(oc.limit, okHandler)
	if err != nil {
		b.Fatal(err)
	}
	if mwFixture.reqs == nil {
		for i := range middlewareClients {
			mwFixture.reqs = append(mwFixture.reqs, clientRequest(i))
		}
		mwFixture.seq = shuffled(rand.New(rand.NewPCG(1, 2)), middlewareClients)
	}
	for i, r := range mwFixture.reqs {
		if got := serve(h, r); got != http.StatusOK {
			release()
			b.Fatalf("mw=%s: client %d's first request got status %d, want 200", mc.name, i, got)
		}
		if got := serve(h, r); got != oc.status {
			release()
			b.Fatalf("mw=%s outcome=%s: client %d's second request got status %d, want %d", mc.name, oc.name, i, got, oc.status)
		}
	}
	mwFixture.name, mwFixture.h, mwFixture.release = b.Name(), h, release
}

// BenchmarkMiddleware measures keyrate's httplimit beside the rate-limiting
// middlewares a user would pick instead, on the same trivial handler, the
// same 1000 clients (RemoteAddr) and the same limit per client, named
// mw=<middleware>/keys=1k/outcome=<allowed|denied>. Each call serves one
// request, from clients in shuffled rounds; each goroutine starts at its
// own offset and reuses one ResponseWriter, whose header map it clears
// before each request. Setup checks that each middleware limits per
// client (checkLimits) and that every client gets the outcome's status;
// the run checks every response's status and reports allowed/op.
func BenchmarkMiddleware(b *testing.B) {
	racetest.Bench()
	var leaves []leaf
	for _, mc := range middlewares {
		for _, oc := range outcomes {
			leaves = append(leaves, leaf{"mw=" + mc.name + "/keys=" + countName(middlewareClients) + "/outcome=" + oc.name, func(b *testing.B) {
				middlewareFor(b, mc, oc)
				h, reqs, seq := mwFixture.h, mwFixture.reqs, mwFixture.seq
				mask := len(seq) - 1
				var goroutines, served, wrong atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(goroutines.Add(1)) * offsetStride
					w := &benchWriter{h: make(http.Header)}
					ok, bad := int64(0), int64(0)
					for pb.Next() {
						clear(w.h)
						w.code = 0
						h.ServeHTTP(w, reqs[seq[i&mask]])
						switch w.code {
						case http.StatusOK:
							ok++
						case oc.status:
						default:
							bad++
						}
						i++
					}
					served.Add(ok)
					wrong.Add(bad)
				})
				b.StopTimer()
				if n := wrong.Load(); n > 0 {
					b.Fatalf("mw=%s outcome=%s: %d of %d responses had a status other than 200 and %d", mc.name, oc.name, n, b.N, oc.status)
				}
				frac := float64(served.Load()) / float64(b.N)
				b.ReportMetric(frac, "allowed/op")
				if (oc.status == http.StatusOK) != (frac == 1) {
					b.Fatalf("mw=%s outcome=%s: %d of %d requests served, want all or none", mc.name, oc.name, served.Load(), b.N)
				}
			}})
		}
	}
	runLeaves(b, leaves)
	if mwFixture.release != nil {
		mwFixture.release()
		mwFixture.name, mwFixture.h, mwFixture.release = "", nil, nil
	}
}
