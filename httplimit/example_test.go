package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

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

// Keyed by API key: a request without the header is refused with 500, never
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
	// "": 500
}
