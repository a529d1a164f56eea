package httplimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/httplimit"
)

// This file calls the package's exported functions the way a hurried user
// might: nil and typed-nil arguments, invalid and conflicting options, a
// nil handler, Refund outside the middleware. Each gets a typed error or
// its documented behaviour, never a panic.

// onlyLimiter is a keyrate.Limiter that is not a PolicyLimiter.
type onlyLimiter struct{ keyrate.Limiter }

func newStore(t *testing.T, limit keyrate.Limit) *atomicbucket.Store {
	t.Helper()
	return newStoreOpts(t, limit)
}

// newStoreOpts is an atomicbucket store of limit on a manual clock, with
// opts, closed when t ends.
func newStoreOpts(t *testing.T, limit keyrate.Limit, opts ...keyrate.Option) *atomicbucket.Store {
	t.Helper()
	s, err := atomicbucket.New(limit, append([]keyrate.Option{keyrate.WithClock(clock.NewManual(0))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// New: "an error wrapping keyrate.ErrInvalidOption if limiter is nil, or
// holds a nil pointer ... if a tier option or WithRefunds is given with a
// limiter that is not a keyrate.PolicyLimiter; or if an option is
// invalid"; ByFunc: "A nil key makes New fail"; ByHeader and TierByHeader:
// "A name that is not a valid header field name makes New fail"; IPv6Prefix
// "from 1 to 128"; ForwardedHeader: "Any other name is an error"; a typed
// nil observer "makes New fail".
func TestMisuseNewRefuses(t *testing.T) {
	store := newStore(t, keyrate.PerSecond(1))
	var nilStore *atomicbucket.Store
	var nilObs keyrate.ObserverFunc
	for _, c := range []struct {
		name    string
		limiter keyrate.Limiter
		opts    []httplimit.Option
	}{
		{"nil limiter", nil, nil},
		{"typed nil limiter", nilStore, nil},
		{"ByFunc(nil)", store, []httplimit.Option{httplimit.ByFunc(nil)}},
		{"ByHeader(empty)", store, []httplimit.Option{httplimit.ByHeader("")}},
		{"ByHeader(space)", store, []httplimit.Option{httplimit.ByHeader("X Key")}},
		{"TierByHeader(colon)", store, []httplimit.Option{httplimit.TierByHeader("X:Plan")}},
		{"IPv6Prefix(0)", store, []httplimit.Option{httplimit.ByIP(httplimit.IPv6Prefix(0))}},
		{"IPv6Prefix(129)", store, []httplimit.Option{httplimit.ByIP(httplimit.IPv6Prefix(129))}},
		{"ForwardedHeader(X-Client)", store, []httplimit.Option{httplimit.ByIP(httplimit.ForwardedHeader("X-Client"))}},
		{"TrustProxies(garbage)", store, []httplimit.Option{httplimit.ByIP(httplimit.TrustProxies("not-a-cidr"))}},
		{"TrustProxies(/33)", store, []httplimit.Option{httplimit.ByIP(httplimit.TrustProxies("10.0.0.0/33"))}},
		{"typed nil observer", store, []httplimit.Option{httplimit.WithObserver(nilObs)}},
		{"TierByHeader without PolicyLimiter", onlyLimiter{store}, []httplimit.Option{httplimit.TierByHeader("X-Plan")}},
		{"WithRefunds without PolicyLimiter", onlyLimiter{store}, []httplimit.Option{httplimit.WithRefunds()}},
		{"WithTier(nil)", store, []httplimit.Option{httplimit.WithTier(nil)}},
		{"WithPolicyName(empty)", store, []httplimit.Option{httplimit.WithPolicyName("")}},
		{"WithPolicyName(quote)", store, []httplimit.Option{httplimit.WithPolicyName(`a"b`)}},
	} {
		mw, err := httplimit.New(c.limiter, c.opts...)
		if !errors.Is(err, keyrate.ErrInvalidOption) || mw != nil {
			t.Errorf("New(%s) = %v, %v; want no middleware and ErrInvalidOption", c.name, mw != nil, err)
		}
	}
}

// Options that are valid but odd: a nil Option, a nil IPOption, a nil
// handler function, key options given twice ("the last one wins").
func TestMisuseOddButValidOptions(t *testing.T) {
	store := newStore(t, keyrate.PerSecond(1))
	mw, err := httplimit.New(store,
		nil,
		httplimit.ByIP(nil),
		httplimit.WithDeniedHandler(nil),
		httplimit.WithErrorHandler(nil),
		httplimit.WithNoKeyHandler(nil),
		httplimit.WithStoreErrorHandler(nil),
		httplimit.WithCost(nil),
		httplimit.WithObserver(nil),
		httplimit.ByHeader("X-First"),
		httplimit.ByHeader("X-Key"), // the last key option wins
	)
	if err != nil {
		t.Fatalf("New with nil and repeated options = %v", err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	defer srv.Close()
	get := func(hdr, val string) int {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if hdr != "" {
			req.Header.Set(hdr, val)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("X-First", "a"); code != http.StatusBadRequest {
		t.Errorf("a request keyed only by the first ByHeader: %d, want 400 (the last key option wins)", code)
	}
	if a, b := get("X-Key", "a"), get("X-Key", "a"); a != http.StatusOK || b != http.StatusTooManyRequests {
		t.Errorf("two requests of key a at 1/s: %d, %d; want 200, 429", a, b)
	}
}

// "A nil handler is wrapped as http.DefaultServeMux, as http.Server treats
// it."
func TestMisuseNilHandlerIsDefaultServeMux(t *testing.T) {
	mw, err := httplimit.New(newStore(t, keyrate.PerSecond(1)), httplimit.ByHeader("X-Key"))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(nil)
	req := httptest.NewRequest("GET", "/keyrate-misuse-unregistered", nil)
	req.Header.Set("X-Key", "a")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil handler: %d, want DefaultServeMux's 404", rec.Code)
	}
}

// Refund: "an error wrapping ErrNotRefundable for a request the middleware
// did not admit with WithRefunds" — a request that never met a middleware,
// a nil one among them, is such a request.
func TestMisuseRefundOutsideMiddleware(t *testing.T) {
	if err := httplimit.Refund(httptest.NewRequest("GET", "/", nil), 1); !errors.Is(err, httplimit.ErrNotRefundable) {
		t.Errorf("Refund(a request no middleware saw) = %v, want ErrNotRefundable", err)
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = errors.New("panic: " + strings.TrimSpace(toString(r)))
			}
		}()
		return httplimit.Refund(nil, 1)
	}()
	if !errors.Is(err, httplimit.ErrNotRefundable) {
		t.Errorf("Refund(nil, 1) = %v, want ErrNotRefundable", err)
	}
}

func toString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "non-string panic value"
}

// Refund, from a handler behind WithRefunds: a cost "below 1 or above what
// the request spent and has not had back" is ErrInvalidCost and refunds
// nothing; a context that is done does not stop an in-process refund.
func TestMisuseRefundCosts(t *testing.T) {
	store := newStore(t, keyrate.PerMinute(3))
	mw, err := httplimit.New(store, httplimit.ByHeader("X-Key"), httplimit.WithRefunds(), httplimit.WithCost(func(*http.Request) int { return 2 }))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errs = append(errs, httplimit.Refund(r, 0), httplimit.Refund(r, 3), httplimit.Refund(r, 2), httplimit.Refund(r, 1))
		ctx, cancel := context.WithTimeout(r.Context(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		errs = append(errs, httplimit.Refund(r.WithContext(ctx), 1))
	}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Key", "a")
	h.ServeHTTP(httptest.NewRecorder(), req)
	want := []error{keyrate.ErrInvalidCost, keyrate.ErrInvalidCost, nil, keyrate.ErrInvalidCost, keyrate.ErrInvalidCost}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || !errors.Is(errs[i], w) {
			t.Errorf("refund %d = %v, want %v", i, errs[i], w)
		}
	}
	if d := store.Peek("a"); d.Remaining != 3 {
		t.Errorf("after spending 2 and refunding 2: Peek = %+v, want 3 remaining", d)
	}
}
