package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// shadowLog collects what a ShadowFunc reports, from the server's
// goroutines.
type shadowLog struct {
	mu      sync.Mutex
	reports []shadowReport
}

type shadowReport struct {
	d   keyrate.Decision
	err error
}

func (l *shadowLog) record(_ *http.Request, d keyrate.Decision, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, shadowReport{d, err})
}

func (l *shadowLog) take() []shadowReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reports
	l.reports = nil
	return r
}

// TestShadowServer: over a real server, shadow mode serves every request,
// sends each decision's fields (a deny's without Retry-After), reports the
// denies, and leaves the bucket as a deny leaves it.
func TestShadowServer(t *testing.T) {
	var log shadowLog
	h, clk, served := newLimited(t, keyrate.PerMinute(2), WithShadow(log.record), WithLegacyHeaders())
	url, client := startServer(t, h, 1)
	for i, s := range []struct {
		advance   time.Duration
		rateLimit string
		reset     string
		denied    bool
	}{
		{0, `"default";r=1;t=30`, "30", false},
		{0, `"default";r=0;t=60`, "60", false},
		{0, `"default";r=0;t=30`, "30", true}, // would be denied: t is its retry time
		{0, `"default";r=0;t=30`, "30", true},
		{30 * time.Second, `"default";r=0;t=60`, "60", false}, // the denies spent nothing: one token came back
		{0, `"default";r=0;t=30`, "30", true},
	} {
		clk.Advance(s.advance)
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("request %d: GET: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("request %d: %d %q, want 200 \"ok\": shadow mode never refuses", i, resp.StatusCode, body)
		}
		if got := resp.Header.Get("RateLimit"); got != s.rateLimit {
			t.Errorf("request %d: RateLimit %q, want %q", i, got, s.rateLimit)
		}
		if got := resp.Header.Get("X-RateLimit-Reset"); got != s.reset {
			t.Errorf("request %d: X-RateLimit-Reset %q, want %q", i, got, s.reset)
		}
		if got, ok := resp.Header["Retry-After"]; ok {
			t.Errorf("request %d: Retry-After %q on a request that was served", i, got)
		}
		reports := log.take()
		switch {
		case !s.denied && len(reports) != 0:
			t.Errorf("request %d was allowed, yet reported: %+v", i, reports)
		case s.denied && (len(reports) != 1 || reports[0].err != nil || reports[0].d.Allowed || reports[0].d.RetryAfter != 30*time.Second):
			t.Errorf("request %d: reports %+v, want one deny with RetryAfter 30s and no error", i, reports)
		}
	}
	if *served != 6 {
		t.Errorf("the handler served %d requests, want all 6", *served)
	}
}

// TestShadowErrors: requests the middleware could not decide are served
// and reported with the error the handlers would have had; the handlers
// are never called.
func TestShadowErrors(t *testing.T) {
	store, err := atomicbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	errRedis := errors.New("dial tcp 10.0.0.9:6379: connection refused")
	refuse := func(w http.ResponseWriter, _ *http.Request, err error) {
		t.Errorf("a handler was called for %v in shadow mode", err)
	}
	for _, tt := range []struct {
		name    string
		limiter keyrate.Limiter
		opts    []Option
		is      error
	}{
		{"header missing", store, []Option{ByHeader("X-API-Key")}, ErrNoKey},
		{"key func error", store, []Option{ByFunc(func(*http.Request) (string, error) { return "", errRedis })}, errRedis},
		{"cost above burst", store, []Option{WithCost(func(*http.Request) int { return 4 })}, keyrate.ErrCostExceedsBurst},
		{"store down", fakeLimiter{err: errRedis}, nil, errRedis},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log shadowLog
			opts := append(tt.opts, WithShadow(log.record), WithErrorHandler(refuse), WithStoreErrorHandler(refuse), WithNoKeyHandler(refuse),
				WithDeniedHandler(func(http.ResponseWriter, *http.Request, keyrate.Decision) {
					t.Error("the denied handler was called in shadow mode")
				}))
			mw, err := New(tt.limiter, opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			served := false
			rec := httptest.NewRecorder()
			mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true })).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if !served || rec.Code != 200 {
				t.Errorf("served %v with status %d, want the request served", served, rec.Code)
			}
			reports := log.take()
			if len(reports) != 1 || !errors.Is(reports[0].err, tt.is) || reports[0].d != (keyrate.Decision{}) {
				t.Errorf("reports %+v, want one with an error wrapping %v and a zero Decision", reports, tt.is)
			}
			if got := rec.Result().Header.Get("RateLimit"); got != "" {
				t.Errorf("RateLimit %q on an undecided request, want none", got)
			}
		})
	}
	if n := store.Len(); n != 0 {
		t.Errorf("store holds %d keys after only failed requests, want 0", n)
	}
}

// TestShadowRefund: a request shadow mode let through although denied
// spent nothing, so it has nothing to refund: a refund would give the
// bucket tokens no request spent.
func TestShadowRefund(t *testing.T) {
	clk := clock.NewManual(0)
	store, err := atomicbucket.New(keyrate.PerMinute(1), keyrate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	srv := refundServer(t, store, ByHeader("X-Client"), WithShadow(nil))
	if code, rl, body := send(t, srv, "X-Client", "alice"); code != 200 || rl != `"default";r=0;t=60` || body != "" {
		t.Fatalf("first request: %d %q %q", code, rl, body)
	}
	code, rl, body := send(t, srv, "X-Client", "alice", "X-Refund", "1")
	if code != 200 || rl != `"default";r=0;t=60` {
		t.Errorf("shadow-denied request: %d %q, want 200 with the deny's fields", code, rl)
	}
	if !strings.Contains(body, fmt.Sprint(keyrate.ErrInvalidCost)) || !strings.Contains(body, "0 tokens") {
		t.Errorf("its refund answered %q, want an ErrInvalidCost naming the 0 tokens it spent", body)
	}
	if d := store.Peek("alice"); d.Remaining != 0 {
		t.Errorf("after the refused refund alice has %d tokens, want 0", d.Remaining)
	}
}
