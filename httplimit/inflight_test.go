package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/inflight"
)

// gate is a handler that holds each request until released, and tells
// when one has arrived.
type gate struct {
	arrived chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{arrived: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.arrived <- struct{}{}
	if r.URL.Path == "/panic" {
		panic(http.ErrAbortHandler) // the server recovers it without logging
	}
	if r.URL.Path != "/quick" {
		<-g.release
	}
	fmt.Fprint(w, "ok")
}

func newStore(t *testing.T, n int) *inflight.Store {
	t.Helper()
	s, err := inflight.New(n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, client *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, "", nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestInflightServer: over a real server, with the cap alone (New's
// limiter nil), n requests of a key are served at once and the n+1th gets
// 429 with a body that names concurrency, not rate; once one returns,
// another is served.
func TestInflightServer(t *testing.T) {
	const n = 2
	g := newGate()
	mw, err := New(nil, WithInflight(newStore(t, n)))
	if err != nil {
		t.Fatal(err)
	}
	url, client := startServer(t, mw(g), n+2)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body, _ := get(t, client, url+"/hold"); code != 200 || body != "ok" {
				t.Errorf("held request: %d %q, want 200 \"ok\"", code, body)
			}
		}()
	}
	for range n {
		<-g.arrived
	}
	code, body, h := get(t, client, url+"/quick")
	if code != 429 || !strings.Contains(body, "in flight (limit 2)") || h.Get("Retry-After") != "1" || h.Get("RateLimit") != "" {
		t.Errorf("request n+1: %d %q Retry-After %q RateLimit %q; want 429 naming the in-flight limit, Retry-After 1, no RateLimit",
			code, body, h.Get("Retry-After"), h.Get("RateLimit"))
	}
	close(g.release)
	wg.Wait()
	if code, _, _ := get(t, client, url+"/quick"); code != 200 {
		t.Errorf("after the held requests returned: %d, want 200", code)
	}
}

// TestInflightPanicReleases: a handler that panics gives its slot back.
func TestInflightPanicReleases(t *testing.T) {
	g := newGate()
	mw, err := New(nil, WithInflight(newStore(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	url, client := startServer(t, mw(g), 1)
	if _, err := client.Get(url + "/panic"); err == nil {
		t.Error("a panicking handler's request succeeded")
	}
	<-g.arrived
	close(g.release)
	for i := range 2 {
		if code, _, _ := get(t, client, url+"/quick"); code != 200 {
			t.Fatalf("request %d after a panic: %d, want 200 (the panic kept its slot)", i, code)
		}
		<-g.arrived
	}
}

// TestInflightBesideRate: with a rate limit beside the cap, a request the
// cap refuses spends no token, and one the rate limit denies holds no
// slot.
func TestInflightBesideRate(t *testing.T) {
	clk := clock.NewManual(0)
	lim, err := atomicbucket.New(keyrate.PerMinute(2), keyrate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	caps := newStore(t, 1)
	var events []keyrate.Event
	mw, err := New(lim, WithInflight(caps), WithObserver(keyrate.ObserverFunc(func(e keyrate.Event) { events = append(events, e) })))
	if err != nil {
		t.Fatal(err)
	}
	// The wrapped handler serves the next request while it holds the
	// slot: the inner request meets the cap.
	var inner *httptest.ResponseRecorder
	nested := false
	var h http.Handler
	h = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !nested {
			nested = true
			inner = httptest.NewRecorder()
			h.ServeHTTP(inner, httptest.NewRequest("GET", "/", nil))
		}
		fmt.Fprint(w, "ok")
	}))
	outer := httptest.NewRecorder()
	h.ServeHTTP(outer, httptest.NewRequest("GET", "/", nil))
	if outer.Code != 200 || inner.Code != 429 || !strings.Contains(inner.Body.String(), "in flight") {
		t.Fatalf("outer %d, inner %d %q; want 200 and 429 in flight", outer.Code, inner.Code, inner.Body)
	}
	// The cap's refusal spent no token: one of the two is left.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Header().Get("RateLimit") != `"default";r=0;t=60` {
		t.Errorf("after a cap refusal: %d RateLimit %q, want 200 r=0 (the refusal spent a token)", rec.Code, rec.Header().Get("RateLimit"))
	}
	// Now the rate limit denies: the slot is given back at once.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 429 || rec.Header().Get("RateLimit") == "" {
		t.Errorf("rate deny: %d RateLimit %q, want 429 with RateLimit", rec.Code, rec.Header().Get("RateLimit"))
	}
	if s, _ := caps.TryAcquire("192.0.2.1"); !s.Acquired() {
		t.Error("a request the rate limit denied kept its slot")
	} else {
		s.Release()
	}
	// The observer told the cap's decisions from the rate's.
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s/%v/%v", e.Policy, e.Inflight, e.Allowed))
	}
	want := "inflight/true/true default/false/true inflight/true/false inflight/true/true default/false/true inflight/true/true default/false/false"
	if strings.Join(got, " ") != want {
		t.Errorf("events %v, want %s", got, want)
	}
}

// TestInflightShadow: shadow mode lets a request over the cap through,
// holding no slot, reports ErrTooManyInFlight, and tells the observer.
func TestInflightShadow(t *testing.T) {
	caps := newStore(t, 1)
	var log shadowLog
	var events []keyrate.Event
	mw, err := New(nil, WithInflight(caps), WithShadow(log.record),
		WithObserver(keyrate.ObserverFunc(func(e keyrate.Event) { events = append(events, e) })))
	if err != nil {
		t.Fatal(err)
	}
	held, _ := caps.TryAcquire("192.0.2.1")
	served := 0
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || served != 1 {
		t.Fatalf("shadow: %d, served %d; want 200 and served", rec.Code, served)
	}
	r := log.take()
	if len(r) != 1 || !errors.Is(r[0].err, ErrTooManyInFlight) {
		t.Errorf("shadow reports %v, want one ErrTooManyInFlight", r)
	}
	if len(events) != 1 || !events[0].Inflight || !events[0].Shadow || events[0].Allowed {
		t.Errorf("events %+v, want one in-flight shadow refusal", events)
	}
	held.Release()
	if got := caps.Len(); got != 1 {
		t.Fatalf("Len() = %d", got)
	}
	if s, _ := caps.TryAcquire("192.0.2.1"); !s.Acquired() {
		t.Error("the shadow pass holds a slot it never took")
	}
}

// TestInflightMisuse: New refuses a nil limiter without a cap, and a nil
// cap, with errors wrapping keyrate.ErrInvalidOption.
func TestInflightMisuse(t *testing.T) {
	var nilStore *inflight.Store
	for name, f := range map[string]func() error{
		"nil limiter, no cap": func() error { _, err := New(nil); return err },
		"nil cap":             func() error { _, err := New(nil, WithInflight(nil)); return err },
		"typed nil cap":       func() error { _, err := New(nil, WithInflight(nilStore)); return err },
	} {
		if err := f(); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("%s: err = %v, want ErrInvalidOption", name, err)
		}
	}
}

// TestInflightAllocs: the cap adds no allocation to a request of a known
// key.
func TestInflightAllocs(t *testing.T) {
	clk := clock.NewManual(0)
	lim, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: time.Nanosecond, Burst: 1 << 20}, keyrate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		limiter keyrate.Limiter
		max     float64
	}{{"alone", nil, 0}, {"beside", lim, 1}} {
		mw, err := New(c.limiter, WithInflight(newStore(t, 4)))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
		r := httptest.NewRequest("GET", "/", nil)
		w := &benchWriter{h: make(http.Header)}
		h.ServeHTTP(w, r)
		if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) }); n > c.max {
			t.Errorf("%s: %v allocations a request, want at most %v", c.name, n, c.max)
		}
	}
}

// TestInflightCritical: with a slot reserved, a request whose context an
// earlier middleware marked inflight.Critical gets the reserved slot while
// an ordinary one is refused.
func TestInflightCritical(t *testing.T) {
	caps, err := inflight.New(2, inflight.WithReserved(1))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := New(nil, WithInflight(caps))
	if err != nil {
		t.Fatal(err)
	}
	limited := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Critical") != "" {
			r = r.WithContext(inflight.Critical(r.Context()))
		}
		limited.ServeHTTP(w, r)
	})
	held, _ := caps.TryAcquire("192.0.2.1")
	defer held.Release()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 429 {
		t.Errorf("ordinary request at n-r held: %d, want 429", rec.Code)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Critical", "1")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 200 {
		t.Errorf("critical request: %d, want 200 (the reserved slot)", rec.Code)
	}
}

// TestInflightCostPanicReleases: a cost function that panics, after the
// request took its slot, gives the slot back.
func TestInflightCostPanicReleases(t *testing.T) {
	lim, err := atomicbucket.New(keyrate.PerMinute(100))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	caps := newStore(t, 1)
	mw, err := New(lim, WithInflight(caps), WithCost(func(r *http.Request) int {
		if r.Header.Get("X-Boom") != "" {
			panic("cost")
		}
		return 1
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the cost function's panic did not reach the server")
			}
		}()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Boom", "1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Errorf("after a panicking cost function: %d, want 200 (it kept its slot)", rec.Code)
	}
}

// TestInflightServerBarrier: g clients started together against a real
// server, each request held by the handler until every one has been
// answered or has arrived: exactly n arrive and g-n get 429, never more
// than n in the handler.
func TestInflightServerBarrier(t *testing.T) {
	const n, g = 3, 16
	gt := newGate()
	gt.arrived = make(chan struct{}, g)
	mw, err := New(nil, WithInflight(newStore(t, n)))
	if err != nil {
		t.Fatal(err)
	}
	url, client := startServer(t, mw(gt), g)
	refused := make(chan struct{}, g)
	var start, wg sync.WaitGroup
	start.Add(1)
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			code, _, _ := get(t, client, url+"/hold")
			switch code {
			case 429:
				refused <- struct{}{}
			case 200:
			default:
				t.Errorf("status %d", code)
				refused <- struct{}{}
			}
		}()
	}
	start.Done()
	arrived, nrefused := 0, 0
	for arrived+nrefused < g {
		select {
		case <-gt.arrived:
			arrived++
		case <-refused:
			nrefused++
		}
	}
	close(gt.release)
	wg.Wait()
	if arrived != n {
		t.Errorf("%d requests reached the handler at once, %d refused; want %d and %d", arrived, nrefused, n, g-n)
	}
}

// countingLimiter is an inflight.Store whose slots count their releases
// (every ReleaseSlot call, the ones that give nothing back included).
type countingLimiter struct {
	*inflight.Store
	releases atomic.Int64
}

func (c *countingLimiter) TryAcquireContext(ctx context.Context, key string) (inflight.Slot, error) {
	s, err := c.Store.TryAcquireContext(ctx, key)
	if err != nil || !s.Acquired() {
		return s, err
	}
	return inflight.NewSlot(&countingRelease{c: c, s: s}, 0), nil
}

type countingRelease struct {
	c *countingLimiter
	s inflight.Slot
}

func (r *countingRelease) ReleaseSlot(uint64) {
	r.c.releases.Add(1)
	r.s.Release()
}

// TestInflightClientGone: a client that disconnects mid-request, whose
// handler returns when the request's context ends, has its slot released
// exactly once, by the time the middleware returns; the key is then free.
func TestInflightClientGone(t *testing.T) {
	lim := &countingLimiter{Store: newStore(t, 1)}
	mw, err := New(nil, WithInflight(lim))
	if err != nil {
		t.Fatal(err)
	}
	arrived, returned := make(chan struct{}, 4), make(chan struct{}, 4)
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			<-r.Context().Done() // until the client has gone
		}
		fmt.Fprint(w, "ok")
	}))
	url, client := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		returned <- struct{}{}
	}), 2)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/hold", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	if code, _, _ := get(t, client, url+"/quick"); code != http.StatusTooManyRequests {
		t.Errorf("a second request while the first is held: %d, want 429", code)
	}
	<-returned // the refused request's
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled request succeeded")
	}
	<-returned // the held request's middleware has returned
	if got := lim.releases.Load(); got != 1 {
		t.Fatalf("%d releases of the gone client's slot, want 1", got)
	}
	if code, _, _ := get(t, client, url+"/quick"); code != 200 {
		t.Errorf("after the client went: %d, want 200 (its slot kept)", code)
	}
	<-returned
	if got := lim.releases.Load(); got != 2 {
		t.Errorf("%d releases after two admitted requests, want 2", got)
	}
}
