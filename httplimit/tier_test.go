package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// policyStores are the stores the policy tests run against.
var policyStores = []struct {
	name string
	new  func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)
}{
	{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return atomicbucket.New(l, o...) }},
	{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return mutexbucket.New(l, o...) }},
	{"striped", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return striped.New(l, o...) }},
}

// forEachStore runs f as a subtest per store, with a PolicyLimiter of
// that store under limit and opts on a manual clock at 0.
func forEachStore(t *testing.T, limit keyrate.Limit, opts []keyrate.Option, f func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual)) {
	t.Helper()
	for _, st := range policyStores {
		t.Run("store="+st.name, func(t *testing.T) {
			clk := clock.NewManual(0)
			l, err := st.new(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
			if err != nil {
				t.Fatalf("New(%v): %v", limit, err)
			}
			pl, ok := l.(keyrate.PolicyLimiter)
			if !ok {
				t.Fatalf("%T is not a keyrate.PolicyLimiter", l)
			}
			f(t, pl, clk)
		})
	}
}

// pro is a two-window policy: 2 a second, and 5 a minute.
var pro = keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{{Rate: 2, Per: time.Second, Burst: 2}, keyrate.PerMinute(5)}}

// step is one request of a table test and the response it expects. An
// empty field must be absent.
type step struct {
	advance    time.Duration
	client     string // the client's address: a key of its own
	tier       string // the X-Plan header, if not empty
	status     int
	policy     string // RateLimit-Policy
	rateLimit  string // RateLimit
	retryAfter string
}

// runSteps sends each step's request to h, advancing clk first, and
// checks the response.
func runSteps(t *testing.T, h http.Handler, clk *clock.Manual, steps []step) {
	t.Helper()
	for i, s := range steps {
		clk.Advance(s.advance)
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = s.client + ":1234"
		if s.tier != "" {
			req.Header.Set("X-Plan", s.tier)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		hd := rec.Result().Header
		name := fmt.Sprintf("step %d (t=%v, client %s, tier %q)", i, clk.Now(), s.client, s.tier)
		if rec.Code != s.status {
			t.Errorf("%s: status %d, want %d", name, rec.Code, s.status)
		}
		for field, want := range map[string]string{"RateLimit-Policy": s.policy, "RateLimit": s.rateLimit, "Retry-After": s.retryAfter} {
			if got, ok := hd[http.CanonicalHeaderKey(field)]; want == "" && ok {
				t.Errorf("%s: %s %q, want none", name, field, got)
			} else if want != "" && hd.Get(field) != want {
				t.Errorf("%s: %s %q, want %q", name, field, hd.Get(field), want)
			}
		}
	}
}

// Clients of the table tests: each is a key of its own.
const (
	alice = "192.0.2.1"
	bob   = "192.0.2.2"
	carol = "192.0.2.3"
	dave  = "192.0.2.4"
	erin  = "192.0.2.5"
)

// okHandler answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })

// TestTwoWindowHeaders: a two-window policy lists both windows in
// RateLimit-Policy, and RateLimit reports the one nearest to denying,
// moving from the burst window to the minute window as the minute's
// quota runs out; t is that window's reset, or Retry-After on a deny.
func TestTwoWindowHeaders(t *testing.T) {
	const policy = `"pro-0";q=2;w=1, "pro-1";q=5;w=60`
	forEachStore(t, keyrate.PerMinute(3), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByHeader("X-Plan"))
		if err != nil {
			t.Fatal(err)
		}
		runSteps(t, mw(okHandler), clk, []step{
			{0, alice, "pro", 200, policy, `"pro-0";r=1;t=1`, ""},             // windows hold 1 and 4
			{0, alice, "pro", 200, policy, `"pro-0";r=0;t=1`, ""},             // 0 and 3
			{0, alice, "pro", 429, policy, `"pro-0";r=0;t=1`, "1"},            // the burst window denies, for 0.5s
			{time.Second, alice, "pro", 200, policy, `"pro-0";r=1;t=1`, ""},   // 1 and 2
			{0, alice, "pro", 200, policy, `"pro-0";r=0;t=1`, ""},             // 0 and 1
			{time.Second, alice, "pro", 200, policy, `"pro-1";r=0;t=58`, ""},  // 1 and 0: the minute window is nearer
			{0, alice, "pro", 429, policy, `"pro-1";r=0;t=10`, "10"},          // the minute window denies, for 10s
			{0, bob, "", 200, `"default";q=3;w=60`, `"default";r=2;t=20`, ""}, // the default policy: one window, today's fields
			{10 * time.Second, alice, "pro", 200, policy, `"pro-1";r=0;t=60`, ""},
		})
	})
}

// TestTierUnknownFallsBack: a tier the limiter does not have is decided
// as a request naming none, under the default policy, and adds nothing
// to the middleware's cache.
func TestTierUnknownFallsBack(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(2), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		var seen error
		mw, err := New(lim, TierByHeader("X-Plan"), WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			seen = err
			DefaultError(w, r, err)
		}))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		runSteps(t, h, clk, []step{
			{0, alice, "enterprise", 200, `"default";q=2;w=60`, `"default";r=1;t=30`, ""},
			{0, alice, "", 200, `"default";q=2;w=60`, `"default";r=0;t=60`, ""}, // the same bucket, the same policy
			{0, alice, "Pro", 429, `"default";q=2;w=60`, `"default";r=0;t=30`, "30"},
			{0, bob, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`, ""},
		})
		if seen != nil {
			t.Errorf("the error handler got %v, want no call", seen)
		}
		if got := cachedNames(h); got != "default pro" {
			t.Errorf("cached policies %q, want %q", got, "default pro")
		}
	})
}

// cachedNames returns the names h's middleware caches, sorted.
func cachedNames(h http.Handler) string {
	var names []string
	for name := range *h.(*middleware).named.Load() {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestTierByContext: authentication middleware in front names the tier
// with ContextWithTier.
func TestTierByContext(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByContext())
		if err != nil {
			t.Fatal(err)
		}
		limited := mw(okHandler)
		auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if plan := r.Header.Get("X-Plan"); plan != "" { // stands for a checked credential
				r = r.WithContext(ContextWithTier(r.Context(), plan))
			}
			limited.ServeHTTP(w, r)
		})
		runSteps(t, auth, clk, []step{
			{0, alice, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`, ""},
			{0, bob, "", 200, `"default";q=1;w=60`, `"default";r=0;t=60`, ""},
			{0, bob, "", 429, `"default";q=1;w=60`, `"default";r=0;t=60`, "60"},
			{0, alice, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=0;t=1`, ""},
		})
	})
	if got := TierFromContext(context.Background()); got != "" {
		t.Errorf("TierFromContext(Background) = %q, want empty", got)
	}
	if got := TierFromContext(ContextWithTier(context.Background(), "pro")); got != "pro" {
		t.Errorf("TierFromContext(ContextWithTier(pro)) = %q, want pro", got)
	}
}

// TestWithTierFunc: WithTier's function names the tier; "" is the
// default policy.
func TestWithTierFunc(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, WithTier(func(r *http.Request) string {
			if strings.HasPrefix(r.Header.Get("X-Plan"), "p") {
				return "pro"
			}
			return ""
		}))
		if err != nil {
			t.Fatal(err)
		}
		runSteps(t, mw(okHandler), clk, []step{
			{0, alice, "premium", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`, ""},
			{0, bob, "basic", 200, `"default";q=1;w=60`, `"default";r=0;t=60`, ""},
		})
	})
}

// TestPolicyFuncHeaders: without a tier option, a store's WithPolicyFunc
// chooses the policy, and the fields name it.
func TestPolicyFuncHeaders(t *testing.T) {
	byKey := func(key string) string {
		if key == "192.0.2.1" {
			return "pro"
		}
		return ""
	}
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(pro), keyrate.WithPolicyFunc(byKey)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		for i, c := range []struct{ addr, policy, rateLimit string }{
			{"192.0.2.1:1", `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`},
			{"192.0.2.2:1", `"default";q=1;w=60`, `"default";r=0;t=60`},
			{"192.0.2.1:1", `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=0;t=1`},
		} {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = c.addr
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if p, rl := rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"); rec.Code != 200 || p != c.policy || rl != c.rateLimit {
				t.Errorf("request %d from %s: %d %q %q, want 200 %q %q", i, c.addr, rec.Code, p, rl, c.policy, c.rateLimit)
			}
		}
	})
}

// TestPolicyFuncUnknown: a store's WithPolicyFunc naming a policy the
// store lacks is a server fault: the error handler, never an admission.
func TestPolicyFuncUnknown(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicyFunc(func(string) string { return "gold" })}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		var seen error
		mw, err := New(lim, WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			seen = err
			DefaultError(w, r, err)
		}))
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		mw(okHandler).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 500 || !errors.Is(seen, keyrate.ErrUnknownPolicy) {
			t.Errorf("status %d, error %v; want 500 with an error wrapping keyrate.ErrUnknownPolicy", rec.Code, seen)
		}
		if rl := rec.Header().Get("RateLimit"); rl != "" {
			t.Errorf("RateLimit %q on an undecided request, want none", rl)
		}
	})
}

// TestSetPolicyHeaders: the fields follow SetPolicy at runtime, for the
// default policy and a tier, from one window to two and back.
func TestSetPolicyHeaders(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(10), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByHeader("X-Plan"), WithPolicyName("api"))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		set := func(p keyrate.Policy) {
			t.Helper()
			if err := lim.SetPolicy(p); err != nil {
				t.Fatalf("SetPolicy(%v): %v", p, err)
			}
		}
		runSteps(t, h, clk, []step{
			{0, alice, "", 200, `"api";q=10;w=60`, `"api";r=9;t=6`, ""},
			{0, bob, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`, ""},
		})
		set(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerMinute(20), keyrate.PerHour(100)}})
		set(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(4)}})
		runSteps(t, h, clk, []step{
			// New clients: how a key's state carries over is the store's business.
			{0, carol, "", 200, `"api-0";q=20;w=60, "api-1";q=100;w=3600`, `"api-0";r=19;t=3`, ""},
			{0, dave, "pro", 200, `"pro";q=4;w=1`, `"pro";r=3;t=1`, ""},
		})
		set(keyrate.Unlimited("pro"))
		runSteps(t, h, clk, []step{{0, dave, "pro", 200, "", "", ""}})
		set(keyrate.Policy{Name: "free", Limits: []keyrate.Limit{keyrate.PerHour(1)}}) // added at runtime
		runSteps(t, h, clk, []step{
			{0, erin, "free", 200, `"free";q=1;w=3600`, `"free";r=0;t=3600`, ""},
			{0, erin, "free", 429, `"free";q=1;w=3600`, `"free";r=0;t=3600`, "3600"},
		})
	})
}

// TestUnlimitedTier: an unlimited policy admits every request, stores
// nothing and sends no rate-limit fields.
func TestUnlimitedTier(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(keyrate.Unlimited("internal"))}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByHeader("X-Plan"), WithLegacyHeaders())
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		for i := range 100 {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Plan", "internal")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Body.String() != "ok" {
				t.Fatalf("request %d: %d %q, want 200 ok", i, rec.Code, rec.Body.String())
			}
			for name := range rec.Result().Header {
				if strings.Contains(strings.ToLower(name), "ratelimit") || name == "Retry-After" {
					t.Fatalf("request %d: field %s %q, want no rate-limit fields", i, name, rec.Result().Header.Get(name))
				}
			}
		}
		if n := lim.Len(); n != 0 {
			t.Errorf("store holds %d keys after unlimited requests, want 0", n)
		}
	})
}

// TestPolicyNames: a policy name that is not a plain structured-field
// String is escaped, and bytes a String cannot hold are sent as '?'.
func TestPolicyNames(t *testing.T) {
	odd := keyrate.Policy{Name: `a"b\c é`, Limits: []keyrate.Limit{keyrate.PerMinute(5)}}
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(odd)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, WithTier(func(*http.Request) string { return odd.Name }))
		if err != nil {
			t.Fatal(err)
		}
		runSteps(t, mw(okHandler), clk, []step{{0, alice, "", 200, `"a\"b\\c ??";q=5;w=60`, `"a\"b\\c ??";r=4;t=12`, ""}})
	})
}

// TestTierOptionErrors: a tier option or WithRefunds needs a
// PolicyLimiter, and is an error at New with anything else.
func TestTierOptionErrors(t *testing.T) {
	store := policyStore(t, keyrate.PerMinute(1))
	plain := decisionLimiter{d: keyrate.Decision{Allowed: true, Limit: keyrate.PerMinute(1)}}
	tests := []struct {
		name    string
		limiter keyrate.Limiter
		opt     Option
		mention string
	}{
		{"header tier on a plain limiter", plain, TierByHeader("X-Plan"), "httplimit.TierByHeader needs a keyrate.PolicyLimiter, and httplimit.decisionLimiter is not one"},
		{"context tier on a func limiter", limiterFunc(func(string, int) (keyrate.Decision, error) { return keyrate.Decision{}, nil }), TierByContext(), "TierByContext needs"},
		{"tier func on a plain limiter", plain, WithTier(func(*http.Request) string { return "" }), "WithTier needs"},
		{"refunds on a plain limiter", plain, WithRefunds(), "WithRefunds needs a keyrate.PolicyLimiter"},
		{"typed nil policy limiter", (*atomicbucket.Store)(nil), TierByHeader("X-Plan"), "the limiter is a nil *atomicbucket.Store"},
		{"nil policy limiter interface", keyrate.PolicyLimiter(nil), TierByHeader("X-Plan"), "the limiter is nil"},
		{"nil tier func", store, WithTier(nil), "WithTier(nil)"},
		{"empty tier header", store, TierByHeader(""), `TierByHeader("")`},
		{"bad tier header", store, TierByHeader("X Plan"), `TierByHeader("X Plan")`},
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

// policyStore returns the first policy store under limit and opts.
func policyStore(t *testing.T, limit keyrate.Limit, opts ...keyrate.Option) keyrate.PolicyLimiter {
	t.Helper()
	l, err := policyStores[0].new(limit, opts...)
	if err != nil {
		t.Fatal(err)
	}
	pl, ok := l.(keyrate.PolicyLimiter)
	if !ok {
		t.Fatalf("%T is not a keyrate.PolicyLimiter", l)
	}
	return pl
}

// TestTierAllocs: naming a tier the limiter has costs no allocation
// beyond the middleware's one (the header values), for a one-window and a
// two-window policy alike, and so does a policy change once its fields
// are rebuilt; WithRefunds adds at most three.
func TestTierAllocs(t *testing.T) {
	big := keyrate.Limit{Rate: 1_000_000_000, Per: time.Second, Burst: 1_000_000}
	wide := keyrate.Policy{Name: "wide", Limits: []keyrate.Limit{big, big.WithBurst(2_000_000)}}
	lim := policyStore(t, big, keyrate.WithPolicies(wide))
	allocs := func(tier string, opts ...Option) float64 {
		mw, err := New(lim, opts...)
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Plan", tier)
		w := &benchWriter{h: make(http.Header)}
		h.ServeHTTP(w, r) // creates the key and the cached fields
		return testing.AllocsPerRun(100, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
			if w.code != 200 || len(w.h["Ratelimit"]) != 1 {
				t.Fatalf("status %d, header %v; want 200 with RateLimit", w.code, w.h)
			}
		})
	}
	base := allocs("")
	for _, c := range []struct {
		name  string
		tier  string
		opts  []Option
		extra float64
	}{
		{"default policy by header", "", []Option{TierByHeader("X-Plan")}, 0},
		{"two windows by header", "wide", []Option{TierByHeader("X-Plan")}, 0},
		{"default by name", "default", []Option{TierByHeader("X-Plan")}, 0},
		{"refunds", "wide", []Option{TierByHeader("X-Plan"), WithRefunds()}, 3},
	} {
		if got := allocs(c.tier, c.opts...); got > base+c.extra {
			t.Errorf("%s: %v allocations a request, want at most %v (%v without a tier option)", c.name, got, base+c.extra, base)
		}
	}
}

// TestSetPolicyConcurrent changes a tier's policy back and forth while
// clients use it: under the race detector, the cached fields are shared
// safely, and every response's RateLimit names an item of its own
// RateLimit-Policy; once the changes stop, the fields are the last
// version's.
func TestSetPolicyConcurrent(t *testing.T) {
	const clients, requests, changes = 4, 200, 100
	versions := []keyrate.Policy{
		{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(1000), keyrate.PerHour(100_000)}},
		{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(2000)}},
	}
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(versions[0])}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByHeader("X-Plan"))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		serve := func(client int) (policy, rateLimit string) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", client+1)
			req.Header.Set("X-Plan", "pro")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit")
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan string, clients)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range requests {
					policy, rl := serve(c)
					item, _, _ := strings.Cut(rl, ";r=")
					if !strings.Contains(policy, item+";q=") {
						errs <- fmt.Sprintf("RateLimit %q names no item of RateLimit-Policy %q", rl, policy)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range changes {
				if err := lim.SetPolicy(versions[(i+1)%2]); err != nil {
					t.Error(err)
				}
			}
		}()
		close(start)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		// changes is even: the last version set is versions[0].
		if policy, rl := serve(clients); policy != `"pro-0";q=1000;w=1, "pro-1";q=100000;w=3600` || !strings.HasPrefix(rl, `"pro-0";r=`) {
			t.Errorf("after the changes: RateLimit-Policy %q RateLimit %q, want the first version's", policy, rl)
		}
	})
}

// changingLimiter is a PolicyLimiter whose AllowTier runs a hook after it
// decides: a policy change landing between a decision and the fields the
// middleware builds for it.
type changingLimiter struct {
	keyrate.PolicyLimiter
	after func()
}

func (l changingLimiter) AllowTier(key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	d, err := l.PolicyLimiter.AllowTier(key, tier, cost)
	l.after()
	return d, err
}

// TestFieldsAcrossChange: fields built while the policy changes under a
// decision mix two versions, and are not cached: when the policy changes
// back, the next request gets the whole policy, not the mix.
func TestFieldsAcrossChange(t *testing.T) {
	v0 := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(1000), keyrate.PerHour(100_000)}}
	v1 := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(2000)}}
	forEachStore(t, keyrate.PerMinute(1), []keyrate.Option{keyrate.WithPolicies(v0)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		next := v1
		mw, err := New(changingLimiter{lim, func() {
			if err := lim.SetPolicy(next); err != nil {
				t.Error(err)
			}
		}}, TierByHeader("X-Plan"))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		serve := func() string {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Plan", "pro")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Header().Get("RateLimit-Policy")
		}
		serve() // decided under v0, its fields built under v1
		if err := lim.SetPolicy(v0); err != nil {
			t.Fatal(err)
		}
		next = v0
		if got, want := serve(), `"pro-0";q=1000;w=1, "pro-1";q=100000;w=3600`; got != want {
			t.Errorf("RateLimit-Policy %q after the change back, want %q", got, want)
		}
	})
}

// TestSetPolicyUnreportedWindow: a SetPolicy that changes only a window
// no decision reports (window 1 of two, while window 0 stays the nearest
// to denying) shows in RateLimit-Policy on the next request: the cached
// fields are rebuilt for every new version of the limiter's policies, not
// only when a decision's reported window no longer matches.
func TestSetPolicyUnreportedWindow(t *testing.T) {
	forEachStore(t, keyrate.PerMinute(10), []keyrate.Option{keyrate.WithPolicies(pro)}, func(t *testing.T, lim keyrate.PolicyLimiter, clk *clock.Manual) {
		mw, err := New(lim, TierByHeader("X-Plan"))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(okHandler)
		runSteps(t, h, clk, []step{
			{0, alice, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=5;w=60`, `"pro-0";r=1;t=1`, ""},
		})
		if err := lim.SetPolicy(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{pro.Limits[0], keyrate.PerMinute(50)}}); err != nil {
			t.Fatal(err)
		}
		runSteps(t, h, clk, []step{
			{0, bob, "pro", 200, `"pro-0";q=2;w=1, "pro-1";q=50;w=60`, `"pro-0";r=1;t=1`, ""},
		})
	})
}
