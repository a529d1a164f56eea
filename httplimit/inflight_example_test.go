package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/keyrate/keyrate/httplimit"
	"github.com/keyrate/keyrate/inflight"
)

// WithInflight caps the requests a client has running at once; with a nil
// limiter, the cap alone. Here the client already has its one slot (as a
// slow request of its own would), so its next request is refused with 429
// naming concurrency; once the slot is back, it is served.
func ExampleWithInflight() {
	caps, err := inflight.New(1)
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(nil, httplimit.WithInflight(caps))
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	serve := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil)) // from 192.0.2.1
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	slow, _ := caps.TryAcquire("192.0.2.1")
	serve()
	slow.Release()
	serve()
	// Output:
	// 429 Too Many Requests: too many requests in flight (limit 1)
	// 200 ok
}
