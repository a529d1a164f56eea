package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/httplimit"
)

// The middleware in front of a handler, keyed by client IP: two requests a
// minute, then 429 with Retry-After. The manual clock stands still, as a
// client's three quick requests would see it.
func Example() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter)
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello\n")
	}))

	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d RateLimit-Policy: %s RateLimit: %s Retry-After: %q\n", rec.Code,
			rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy: "default";q=2;w=60 RateLimit: "default";r=1;t=30 Retry-After: ""
	// 200 RateLimit-Policy: "default";q=2;w=60 RateLimit: "default";r=0;t=60 Retry-After: ""
	// 429 RateLimit-Policy: "default";q=2;w=60 RateLimit: "default";r=0;t=30 Retry-After: "30"
}

// Behind a load balancer at 10.0.0.0/8, the client is the right-most
// address in X-Forwarded-For that is not a proxy; what the client itself
// put in the header is ignored, and the header is not read at all on a
// connection that does not come from a proxy.
func ExampleTrustProxies() {
	limiter, err := atomicbucket.New(keyrate.PerMinute(1))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.ByIP(httplimit.TrustProxies("10.0.0.0/8")))
	if err != nil {
		panic(err)
	}
	h := limit(http.NotFoundHandler())

	send := func(peer, xff string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	fmt.Println(send("10.0.0.2:5000", "1.1.1.1, 203.0.113.9, 10.0.0.1")) // client 203.0.113.9
	fmt.Println(send("10.0.0.3:5000", "2.2.2.2, 203.0.113.9"))           // the same client again
	fmt.Println(send("203.0.113.9:5000", "9.9.9.9"))                     // direct: keyed by its own address
	fmt.Println(send("198.51.100.1:5000", "203.0.113.9"))                // spoofing someone else's: no effect on them
	// Output:
	// 404
	// 429
	// 429
	// 404
}

// Keyed by API key: a request without the header is refused with 400 Bad
// Request (WithNoKeyHandler changes the answer), never
// counted against a shared bucket.
func ExampleByHeader() {
	limiter, err := atomicbucket.New(keyrate.PerMinute(1))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.ByHeader("X-API-Key"))
	if err != nil {
		panic(err)
	}
	h := limit(http.NotFoundHandler())
	for _, key := range []string{"alice", "bob", "alice", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%q: %d\n", key, rec.Code)
	}
	// Output:
	// "alice": 404
	// "bob": 404
	// "alice": 429
	// "": 400
}

// Tiers from a header that a gateway sets after authenticating the client:
// each plan is one of the store's policies, and a request without the
// header, or naming a plan the store lacks, gets the default policy.
func ExampleTierByHeader() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(1), keyrate.WithClock(clk),
		keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(100)}}))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.ByHeader("X-API-Key"), httplimit.TierByHeader("X-Plan"))
	if err != nil {
		panic(err)
	}
	h := limit(http.NotFoundHandler())
	for _, c := range []struct{ key, plan string }{{"alice", "pro"}, {"alice", "pro"}, {"bob", ""}, {"bob", ""}, {"carol", "gold"}} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", c.key)
		r.Header.Set("X-Plan", c.plan)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%s %q: %d %s | %s\n", c.key, c.plan, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
	}
	// Output:
	// alice "pro": 404 "pro";q=100;w=60 | "pro";r=99;t=1
	// alice "pro": 404 "pro";q=100;w=60 | "pro";r=98;t=2
	// bob "": 404 "default";q=1;w=60 | "default";r=0;t=60
	// bob "": 429 "default";q=1;w=60 | "default";r=0;t=60
	// carol "gold": 404 "default";q=1;w=60 | "default";r=0;t=60
}

// Authentication middleware in front names the tier in the request's
// context; it needs only ContextWithTier from this package.
func ExampleTierByContext() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(1), keyrate.WithClock(clk),
		keyrate.WithPolicies(keyrate.Unlimited("internal")))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.TierByContext())
	if err != nil {
		panic(err)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer ops-token" { // stands for a real check
				r = r.WithContext(httplimit.ContextWithTier(r.Context(), "internal"))
			}
			next.ServeHTTP(w, r)
		})
	}
	h := auth(limit(http.NotFoundHandler()))
	for _, token := range []string{"", "", "Bearer ops-token", "Bearer ops-token"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%q: %d RateLimit: %q\n", token, rec.Code, rec.Header().Get("RateLimit"))
	}
	// Output:
	// "": 404 RateLimit: "\"default\";r=0;t=60"
	// "": 429 RateLimit: "\"default\";r=0;t=60"
	// "Bearer ops-token": 404 RateLimit: ""
	// "Bearer ops-token": 404 RateLimit: ""
}

// A policy of two windows, enforced together: at most 2 requests a second,
// and 5 a minute. RateLimit-Policy lists both windows, named after the
// policy and the window's index; RateLimit reports the one nearest to
// denying, which moves from the second to the minute as the minute's
// quota runs out.
func Example_twoWindows() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerSecond(2), keyrate.WithClock(clk),
		keyrate.WithPolicies(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{
			keyrate.PerSecond(2),
			keyrate.PerMinute(5),
		}}))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.WithPolicyName("api"))
	if err != nil {
		panic(err)
	}
	h := limit(http.NotFoundHandler())
	for i := range 7 {
		if i == 3 || i == 5 {
			clk.Advance(time.Second)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if i == 0 {
			fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
		}
		fmt.Printf("t=%v %d RateLimit: %s Retry-After: %q\n", clk.Now(), rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// RateLimit-Policy: "api-0";q=2;w=1, "api-1";q=5;w=60
	// t=0s 404 RateLimit: "api-0";r=1;t=1 Retry-After: ""
	// t=0s 404 RateLimit: "api-0";r=0;t=1 Retry-After: ""
	// t=0s 429 RateLimit: "api-0";r=0;t=1 Retry-After: "1"
	// t=1s 404 RateLimit: "api-0";r=1;t=1 Retry-After: ""
	// t=1s 404 RateLimit: "api-0";r=0;t=1 Retry-After: ""
	// t=2s 404 RateLimit: "api-1";r=0;t=58 Retry-After: ""
	// t=2s 429 RateLimit: "api-1";r=0;t=10 Retry-After: "10"
}

// A handler gives back the tokens of a request whose upstream failed, so
// that the client is not charged for it.
func ExampleRefund() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	limit, err := httplimit.New(limiter, httplimit.WithRefunds())
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flaky" { // the upstream failed
			if err := httplimit.Refund(r, 1); err != nil {
				panic(err)
			}
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	for _, path := range []string{"/flaky", "/flaky", "/flaky", "/", "/", "/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code)
	}
	// Output:
	// /flaky 502
	// /flaky 502
	// /flaky 502
	// / 200
	// / 200
	// / 429
}

// Shadow mode tries a limit of two requests a minute out on live traffic:
// every request is served with the fields of its decision, and those the
// limit would have refused are counted.
func ExampleWithShadow() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithClock(clk))
	if err != nil {
		panic(err)
	}
	var wouldDeny int // a metric in production; the report runs on the request's goroutine
	limit, err := httplimit.New(limiter, httplimit.WithShadow(func(r *http.Request, d keyrate.Decision, err error) {
		wouldDeny++
	}))
	if err != nil {
		panic(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello\n")
	}))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d RateLimit: %s\n", rec.Code, rec.Header().Get("RateLimit"))
	}
	fmt.Println("would have denied:", wouldDeny)
	// Output:
	// 200 RateLimit: "default";r=1;t=30
	// 200 RateLimit: "default";r=0;t=60
	// 200 RateLimit: "default";r=0;t=30
	// would have denied: 1
}
