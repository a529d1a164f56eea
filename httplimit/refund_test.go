package httplimit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// refundServer serves, behind the middleware with WithRefunds and the
// tier from X-Plan, a handler that refunds the request's X-Refund tokens
// (if set) and answers 200 with the refund's error, if any, as its body.
func refundServer(t *testing.T, lim keyrate.PolicyLimiter, opts ...Option) *httptest.Server {
	t.Helper()
	mw, err := New(lim, append([]Option{WithRefunds(), TierByHeader("X-Plan")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := r.Header.Get("X-Refund"); n != "" {
			cost, _ := strconv.Atoi(n)
			if err := Refund(r, cost); err != nil {
				io.WriteString(w, err.Error())
			}
		}
	})))
	t.Cleanup(srv.Close)
	return srv
}

// send makes a GET to srv with the header lines hdr (name, value...) and
// returns the status, RateLimit field and body.
func send(t *testing.T, srv *httptest.Server, hdr ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("RateLimit"), string(body)
}

// TestRefund: over a real server, a handler's refund gives the request's
// tokens back to its key under its tier, so that refunded requests never
// use up the bucket; the response's fields report the spend, which the
// refund follows.
func TestRefund(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(2), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		srv := refundServer(t, lim, ByHeader("X-Client"), WithCost(func(r *http.Request) int {
			n, _ := strconv.Atoi(r.Header.Get("X-Cost"))
			return max(n, 1)
		}))
		for i, s := range []struct {
			hdr       []string
			status    int
			rateLimit string
		}{
			{[]string{"X-Refund", "1"}, 200, `"default";r=1;t=30`},
			{[]string{"X-Refund", "1"}, 200, `"default";r=1;t=30`}, // the first was given back
			{[]string{"X-Cost", "2", "X-Refund", "1"}, 200, `"default";r=0;t=60`},
			{nil, 200, `"default";r=0;t=60`}, // one of the two came back
			{nil, 429, `"default";r=0;t=30`},
			{[]string{"X-Plan", "pro", "X-Refund", "1"}, 200, `"pro-0";r=1;t=1`},
			{[]string{"X-Plan", "pro", "X-Refund", "1"}, 200, `"pro-0";r=1;t=1`},
			{[]string{"X-Plan", "pro"}, 200, `"pro-0";r=1;t=1`},
			{[]string{"X-Plan", "pro"}, 200, `"pro-0";r=0;t=1`},
			{[]string{"X-Plan", "pro"}, 429, `"pro-0";r=0;t=1`},
		} {
			client := "alice"
			if len(s.hdr) > 0 && s.hdr[0] == "X-Plan" {
				client = "bob"
			}
			code, rl, body := send(t, srv, append(s.hdr, "X-Client", client)...)
			if code != s.status || rl != s.rateLimit || (code == 200 && body != "") {
				t.Errorf("request %d %q: %d %q body %q, want %d %q and no error", i, s.hdr, code, rl, body, s.status, s.rateLimit)
			}
		}
	})
}

// TestRefundErrors: what Refund refuses, and that a refused refund gives
// nothing back.
func TestRefundErrors(t *testing.T) {
	lim := policyStore(t, keyrate.PerMinute(3), keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(keyrate.Unlimited("internal")))
	if err := Refund(httptest.NewRequest("GET", "/", nil), 1); !errors.Is(err, ErrNotRefundable) {
		t.Errorf("Refund of a request no middleware admitted: %v, want ErrNotRefundable", err)
	}
	var errs []error
	mw, err := New(lim, WithRefunds(), TierByHeader("X-Plan"), WithCost(func(*http.Request) int { return 2 }))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		for _, cost := range []int{0, -1, 3, 1, 2, 1} {
			errs = append(errs, Refund(r, cost))
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	for i, want := range []error{keyrate.ErrInvalidCost, keyrate.ErrInvalidCost, keyrate.ErrInvalidCost, nil, keyrate.ErrInvalidCost, nil} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("refund %d: %v, want %v", i, errs[i], want)
		}
	}
	// Both tokens are back: the bucket is full.
	if d := lim.Peek("192.0.2.1"); d.Remaining != 3 {
		t.Errorf("after refunds of the whole cost, %d tokens left, want 3", d.Remaining)
	}

	errs = nil
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Plan", "internal")
	h.ServeHTTP(httptest.NewRecorder(), req)
	for i, want := range []error{keyrate.ErrInvalidCost, keyrate.ErrInvalidCost, nil, nil, nil, nil} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("unlimited, refund %d: %v, want %v", i, errs[i], want)
		}
	}
}

// TestRefundConcurrent: goroutines of one handler refund one token each
// of a cost of 4, all at once: exactly 4 succeed.
func TestRefundConcurrent(t *testing.T) {
	lim := policyStore(t, keyrate.PerMinute(10), keyrate.WithClock(clock.NewManual(0)))
	var ok, refused int
	mw, err := New(lim, WithRefunds(), WithCost(func(*http.Request) int { return 4 }))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := Refund(r, 1)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, keyrate.ErrInvalidCost):
					refused++
				default:
					t.Errorf("Refund: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if ok != 4 || refused != 12 {
		t.Errorf("%d refunds made and %d refused, want 4 and 12", ok, refused)
	}
	if d := lim.Peek("192.0.2.1"); d.Remaining != 10 {
		t.Errorf("%d tokens left, want all 10 back", d.Remaining)
	}
}
