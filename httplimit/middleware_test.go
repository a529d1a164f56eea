package httplimit

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
)

// newLimited returns a handler limiting ok with limit on a manual clock
// starting at 0, and a count of the requests ok served.
func newLimited(t *testing.T, limit keyrate.Limit, opts ...Option) (http.Handler, *clock.Manual, *int) {
	t.Helper()
	clk := clock.NewManual(0)
	lim, err := atomicbucket.New(limit, keyrate.WithClock(clk))
	if err != nil {
		t.Fatalf("atomicbucket.New(%v): %v", limit, err)
	}
	mw, err := New(lim, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	served := new(int)
	return mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		*served++
		fmt.Fprint(w, "ok")
	})), clk, served
}

// want is the response a step expects. An empty field must be absent.
type want struct {
	status     int
	rateLimit  string
	retryAfter string
}

// check compares rec against w, naming the step in failures.
func check(t *testing.T, step string, rec *httptest.ResponseRecorder, w want) {
	t.Helper()
	h := rec.Result().Header
	if rec.Code != w.status {
		t.Errorf("%s: status %d, want %d", step, rec.Code, w.status)
	}
	if got := h.Get("RateLimit"); got != w.rateLimit {
		t.Errorf("%s: RateLimit %q, want %q", step, got, w.rateLimit)
	}
	if got, ok := h["Retry-After"]; w.retryAfter == "" && ok {
		t.Errorf("%s: Retry-After %q, want none", step, got)
	} else if w.retryAfter != "" && h.Get("Retry-After") != w.retryAfter {
		t.Errorf("%s: Retry-After %q, want %q", step, h.Get("Retry-After"), w.retryAfter)
	}
}

func TestHeadersExact(t *testing.T) {
	h, clk, served := newLimited(t, keyrate.PerMinute(3))
	steps := []struct {
		advance time.Duration
		want
	}{
		{0, want{200, `"default";r=2;t=20`, ""}},
		{0, want{200, `"default";r=1;t=40`, ""}},
		{0, want{200, `"default";r=0;t=60`, ""}},
		{0, want{429, `"default";r=0;t=20`, "20"}},                      // denied: t is Retry-After
		{5 * time.Second, want{429, `"default";r=0;t=15`, "15"}},        // partial refill, still short
		{500 * time.Millisecond, want{429, `"default";r=0;t=15`, "15"}}, // 14.5s rounds up
		{14500 * time.Millisecond, want{200, `"default";r=0;t=60`, ""}}, // one token back at 20s
		{30 * time.Second, want{200, `"default";r=0;t=50`, ""}},         // 1.5 tokens back, spend 1
		{0, want{429, `"default";r=0;t=10`, "10"}},
		{10*time.Second - time.Nanosecond, want{429, `"default";r=0;t=1`, "1"}}, // 1ns short: never 0
		{time.Nanosecond, want{200, `"default";r=0;t=60`, ""}},
		{60 * time.Second, want{200, `"default";r=2;t=20`, ""}}, // full again
		{35 * time.Second, want{200, `"default";r=2;t=20`, ""}}, // full stays full
	}
	allowed := 0
	for i, s := range steps {
		clk.Advance(s.advance)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		step := fmt.Sprintf("step %d (t=%v)", i, clk.Now())
		check(t, step, rec, s.want)
		if got := rec.Result().Header.Get("RateLimit-Policy"); got != `"default";q=3;w=60` {
			t.Errorf("%s: RateLimit-Policy %q, want %q", step, got, `"default";q=3;w=60`)
		}
		if s.status == 200 {
			allowed++
			if body := rec.Body.String(); body != "ok" {
				t.Errorf("%s: body %q, want the handler's %q", step, body, "ok")
			}
		} else if body := rec.Body.String(); body != "Too Many Requests\n" {
			t.Errorf("%s: body %q, want %q", step, body, "Too Many Requests\n")
		}
	}
	if *served != allowed {
		t.Errorf("handler served %d requests, want the %d allowed", *served, allowed)
	}
}

func TestLegacyHeaders(t *testing.T) {
	h, clk, _ := newLimited(t, keyrate.Limit{Rate: 2, Per: time.Second, Burst: 4}, WithLegacyHeaders(), WithPolicyName("api"))
	type legacy struct{ limit, remaining, reset, retry string }
	steps := []struct {
		advance time.Duration
		policy  string
		legacy
	}{
		{0, `"api";q=4;w=2`, legacy{"4", "3", "1", ""}},
		{0, `"api";q=4;w=2`, legacy{"4", "2", "1", ""}},
		{0, `"api";q=4;w=2`, legacy{"4", "1", "2", ""}},
		{0, `"api";q=4;w=2`, legacy{"4", "0", "2", ""}},
		{0, `"api";q=4;w=2`, legacy{"4", "0", "1", "1"}},
		{250 * time.Millisecond, `"api";q=4;w=2`, legacy{"4", "0", "1", "1"}},
		{250 * time.Millisecond, `"api";q=4;w=2`, legacy{"4", "0", "2", ""}},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		hd := rec.Result().Header
		got := legacy{hd.Get("X-RateLimit-Limit"), hd.Get("X-RateLimit-Remaining"), hd.Get("X-RateLimit-Reset"), hd.Get("Retry-After")}
		if got != s.legacy {
			t.Errorf("step %d: (limit, remaining, reset, retry) = %q, want %q", i, got, s.legacy)
		}
		if p := hd.Get("RateLimit-Policy"); p != s.policy {
			t.Errorf("step %d: RateLimit-Policy %q, want %q", i, p, s.policy)
		}
		wantRL := `"api";r=` + s.remaining + ";t=" + s.reset
		if rl := hd.Get("RateLimit"); rl != wantRL {
			t.Errorf("step %d: RateLimit %q, want %q", i, rl, wantRL)
		}
	}
}

// TestRetryAfterNeverZero denies at offsets across one 3s refill, the last
// 1ns before it: Retry-After is the wait rounded up, so 1 there, never 0.
func TestRetryAfterNeverZero(t *testing.T) {
	h, clk, _ := newLimited(t, keyrate.Limit{Rate: 1, Per: 3 * time.Second, Burst: 1})
	serve := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec
	}
	check(t, "first", serve(), want{200, `"default";r=0;t=3`, ""})
	for _, at := range []time.Duration{0, time.Second, 2 * time.Second, 3*time.Second - time.Nanosecond} {
		clk.Set(at)
		wantRA := fmt.Sprint(int64((3*time.Second - at + time.Second - 1) / time.Second))
		check(t, fmt.Sprintf("at %v", at), serve(), want{429, `"default";r=0;t=` + wantRA, wantRA})
	}
}

// fakeLimiter returns a fixed error from AllowN.
type fakeLimiter struct {
	keyrate.Limiter
	err error
}

func (f fakeLimiter) AllowN(string, int) (keyrate.Decision, error) { return keyrate.Decision{}, f.err }

func TestErrorsNeverAdmit(t *testing.T) {
	store, err := atomicbucket.New(keyrate.PerMinute(3), keyrate.WithClock(clock.NewManual(0)))
	if err != nil {
		t.Fatal(err)
	}
	errRedis := errors.New("dial tcp 10.0.0.9:6379: connection refused")
	tests := []struct {
		name       string
		limiter    keyrate.Limiter
		opts       []Option
		status     int
		retryAfter string
		is         error
	}{
		{"cost 0", store, []Option{WithCost(func(*http.Request) int { return 0 })}, 500, "", keyrate.ErrInvalidCost},
		{"cost -1", store, []Option{WithCost(func(*http.Request) int { return -1 })}, 500, "", keyrate.ErrInvalidCost},
		{"cost above burst", store, []Option{WithCost(func(*http.Request) int { return 4 })}, 500, "", keyrate.ErrCostExceedsBurst},
		{"header missing", store, []Option{ByHeader("X-API-Key")}, 400, "", ErrNoKey},
		{"key func error", store, []Option{ByFunc(func(*http.Request) (string, error) { return "", errRedis })}, 500, "", errRedis},
		{"key func empty", store, []Option{ByFunc(func(*http.Request) (string, error) { return "", nil })}, 400, "", ErrNoKey},
		{"bad remote address", store, []Option{ByIP()}, 500, "", ErrBadAddress},
		{"invalid key", fakeLimiter{err: fmt.Errorf("%w: too long", keyrate.ErrInvalidKey)}, nil, 500, "", keyrate.ErrInvalidKey},
		{"store down", fakeLimiter{err: errRedis}, nil, 503, "1", errRedis},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen error
			record := func(w http.ResponseWriter, r *http.Request, err error) {
				seen = err
				switch tt.status {
				case 500:
					DefaultError(w, r, err)
				case 400:
					DefaultNoKey(w, r, err)
				default:
					DefaultStoreError(w, r, err)
				}
			}
			opts := append(tt.opts, WithErrorHandler(record), WithStoreErrorHandler(record), WithNoKeyHandler(record))
			mw, err := New(tt.limiter, opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			served := false
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
			req := httptest.NewRequest("GET", "/", nil)
			if tt.name == "bad remote address" {
				req.RemoteAddr = "@pipe"
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if served {
				t.Errorf("the wrapped handler ran; want the request stopped")
			}
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			if !errors.Is(seen, tt.is) {
				t.Errorf("handler got error %v, want one wrapping %v", seen, tt.is)
			}
			hd := rec.Result().Header
			if got := hd.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if got := hd.Get("RateLimit"); got != "" {
				t.Errorf("RateLimit %q on an undecided request, want none", got)
			}
			if strings.Contains(rec.Body.String(), "refused") {
				t.Errorf("body %q leaks the error", rec.Body.String())
			}
		})
	}
	if n := store.Len(); n != 0 {
		t.Errorf("store holds %d keys after only failed requests, want 0", n)
	}
}

func TestDeniedHandler(t *testing.T) {
	var got keyrate.Decision
	h, _, _ := newLimited(t, keyrate.PerMinute(1), WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d keyrate.Decision) {
		got = d
		if ra := w.Header().Get("Retry-After"); ra != "60" {
			t.Errorf("denied handler saw Retry-After %q, want 60 already set", ra)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	for i, wantStatus := range []int{200, 503} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != wantStatus {
			t.Errorf("request %d: status %d, want %d", i, rec.Code, wantStatus)
		}
	}
	if got.Allowed || got.RetryAfter != time.Minute || got.Limit != keyrate.PerMinute(1) {
		t.Errorf("denied handler got %+v, want a deny with RetryAfter 1m under %v", got, keyrate.PerMinute(1))
	}
}

func TestByHeaderKeysSeparately(t *testing.T) {
	h, _, _ := newLimited(t, keyrate.PerMinute(1), ByHeader("x-api-key"))
	for i, s := range []struct {
		key    string
		status int
	}{{"alice", 200}, {"bob", 200}, {"alice", 429}, {"bob", 429}, {"carol", 200}} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Api-Key", s.key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != s.status {
			t.Errorf("request %d (key %s): status %d, want %d", i, s.key, rec.Code, s.status)
		}
	}
}

// limiterFunc is a Limiter whose AllowN is a func: a nil one is a typed nil
// that is not a pointer.
type limiterFunc func(string, int) (keyrate.Decision, error)

func (f limiterFunc) Allow(key string) bool {
	d, _ := f(key, 1)
	return d.Allowed
}
func (f limiterFunc) AllowN(key string, cost int) (keyrate.Decision, error) { return f(key, cost) }
func (f limiterFunc) Peek(string) keyrate.Decision                          { return keyrate.Decision{} }
func (f limiterFunc) Len() int                                              { return 0 }

func TestOptionErrors(t *testing.T) {
	store, err := atomicbucket.New(keyrate.PerMinute(3))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		limiter keyrate.Limiter
		opt     Option
		mention string
	}{
		{"nil limiter", nil, nil, "nil"},
		{"typed nil limiter", (*atomicbucket.Store)(nil), nil, "the limiter is a nil *atomicbucket.Store"},
		{"nil func limiter", limiterFunc(nil), nil, "the limiter is a nil httplimit.limiterFunc"},
		{"bad CIDR", store, ByIP(TrustProxies("10.0.0.0/8", "10.0.0/8")), `"10.0.0/8"`},
		{"mapped CIDR too wide", store, ByIP(TrustProxies("::ffff:0:0/90")), `"::ffff:0:0/90"`},
		{"prefix 0", store, ByIP(IPv6Prefix(0)), "IPv6Prefix(0)"},
		{"prefix 129", store, ByIP(IPv6Prefix(129)), "IPv6Prefix(129)"},
		{"unknown forwarding header", store, ByIP(ForwardedHeader("X-Client-IP")), `"X-Client-IP"`},
		{"empty header name", store, ByHeader(""), `ByHeader("")`},
		{"header name with space", store, ByHeader("X API"), `"X API"`},
		{"nil key func", store, ByFunc(nil), "ByFunc(nil)"},
		{"empty policy name", store, WithPolicyName(""), `WithPolicyName("")`},
		{"quote in policy name", store, WithPolicyName(`a"b`), `0x22`},
		{"long policy name", store, WithPolicyName(strings.Repeat("p", 65)), "length 65"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mw, err := New(tt.limiter, tt.opt)
			if !errors.Is(err, keyrate.ErrInvalidOption) {
				t.Fatalf("New: error %v, want one wrapping keyrate.ErrInvalidOption", err)
			}
			if mw != nil {
				t.Errorf("New returned middleware along with error %v", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %s", err, tt.mention)
			}
		})
	}
}

// decisionLimiter answers every AllowN with a fixed Decision.
type decisionLimiter struct {
	keyrate.Limiter
	d keyrate.Decision
}

func (f decisionLimiter) AllowN(string, int) (keyrate.Decision, error) { return f.d, nil }

// TestHeaderExtremes: whatever Decision a limiter returns, at the ends of
// time.Duration and int, every header value is a non-negative integer
// within a structured-field Integer's 15 digits, never wrapped or negative.
func TestHeaderExtremes(t *testing.T) {
	const sfMax = "999999999999999"
	huge := keyrate.Limit{Rate: 1, Per: 1, Burst: 1 << 62} // the largest Burst keyrate accepts
	maxSecs := "9223372037"                                // math.MaxInt64 ns in whole seconds, rounded up
	for _, c := range []struct {
		name        string
		d           keyrate.Decision
		policy      string // RateLimit-Policy
		rateLimit   string // RateLimit
		retryAfter  string
		legacyLimit string
	}{
		{"longest deny", keyrate.Decision{Limit: keyrate.PerMinute(3), RetryAfter: math.MaxInt64, ResetAfter: math.MaxInt64},
			`"default";q=3;w=60`, `"default";r=0;t=` + maxSecs, maxSecs, "3"},
		{"longest allow", keyrate.Decision{Allowed: true, Limit: keyrate.PerMinute(3), Remaining: 2, ResetAfter: math.MaxInt64},
			`"default";q=3;w=60`, `"default";r=2;t=` + maxSecs, "", "3"},
		{"negative durations", keyrate.Decision{Limit: keyrate.PerMinute(3), RetryAfter: math.MinInt64, ResetAfter: math.MinInt64},
			`"default";q=3;w=60`, `"default";r=0;t=1`, "1", "3"},
		{"negative remaining", keyrate.Decision{Allowed: true, Limit: keyrate.PerMinute(3), Remaining: -5, ResetAfter: -time.Second},
			`"default";q=3;w=60`, `"default";r=0;t=0`, "", "3"},
		{"huge burst and remaining", keyrate.Decision{Allowed: true, Limit: huge, Remaining: math.MaxInt64, ResetAfter: time.Second},
			`"default";q=` + sfMax + ";w=4611686019", `"default";r=` + sfMax + ";t=1", "", sfMax},
	} {
		t.Run(c.name, func(t *testing.T) {
			mw, err := New(decisionLimiter{d: c.d}, WithLegacyHeaders())
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			mw(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			h := rec.Result().Header
			for name, want := range map[string]string{
				"RateLimit-Policy": c.policy, "RateLimit": c.rateLimit, "Retry-After": c.retryAfter, "X-RateLimit-Limit": c.legacyLimit,
			} {
				if got := h.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
		})
	}
}
