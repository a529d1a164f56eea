package httplimit

import (
	"errors"
	"fmt"
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

// byKeysStore is a store with a user tier (1 an hour) and an
// organisation tier (2 an hour), and a middleware keyed by both, the
// request's cost given by the header X-Cost (1 without).
func byKeysStore(t *testing.T, keys func(user, org keyrate.Tier) KeysFunc, opts ...Option) (*atomicbucket.Store, http.Handler, keyrate.Tier, keyrate.Tier) {
	t.Helper()
	lim, err := atomicbucket.New(keyrate.PerHour(100), keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerHour(1)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerHour(2)}},
	))
	if err != nil {
		t.Fatal(err)
	}
	user, _ := lim.Tier("user")
	org, _ := lim.Tier("org")
	mw, err := New(lim, append([]Option{ByKeys(keys(user, org))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })), user, org
}

// userAndOrg keys a request by its X-User header's user and the one
// organisation "acme".
func userAndOrg(user, org keyrate.Tier) KeysFunc {
	return func(r *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
		return append(keys, keyrate.KeyCost{Key: r.Header.Get("X-User"), Tier: user}, keyrate.KeyCost{Key: "acme", Tier: org}), nil
	}
}

func keysGet(h http.Handler, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-User", user)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// TestByKeysAllOrNothing: a request the organisation denies is not
// charged to its user, one its user denies not to the organisation; the
// observer names the key that denied, under its policy; the response
// names neither key.
func TestByKeysAllOrNothing(t *testing.T) {
	var events []keyrate.Event
	lim, h, user, org := byKeysStore(t, userAndOrg, WithObserver(keyrate.ObserverFunc(func(e keyrate.Event) { events = append(events, e) })))
	for i, c := range []struct {
		user    string
		code    int
		denier  string
		policy  string
		allowed bool
	}{
		{"alice", 200, "alice", "user", true},      // user 0 left, org 1
		{"alice", 429, "alice", "user", false},     // alice's own limit
		{"bob", 200, "bob", "user", true},          // bob 0 left, org 0: the first of those
		{"carol", 429, "acme", "org", false},       // the organisation's
		{"secret-user", 429, "acme", "org", false}, // not charged to carol's neighbour either
	} {
		rec := keysGet(h, c.user)
		e := events[len(events)-1]
		if rec.Code != c.code || e.Key != c.denier || e.Policy != c.policy || e.Allowed != c.allowed {
			t.Fatalf("request %d (%s): %d, event %+v; want %d, event naming %s under %s", i, c.user, rec.Code, e, c.code, c.denier, c.policy)
		}
		if body := rec.Body.String(); strings.Contains(body, c.user) || strings.Contains(body, "acme") {
			t.Fatalf("request %d: the body %q names a key", i, body)
		}
	}
	for _, who := range []string{"carol", "secret-user"} {
		if d, _ := lim.PeekTier(who, user); d.Remaining != 1 {
			t.Fatalf("%s, denied by the organisation, was charged: %+v", who, d)
		}
	}
	if d, _ := lim.PeekTier("acme", org); d.Remaining != 0 {
		t.Fatalf("the organisation after alice and bob = %+v, want 0 left", d)
	}
}

// TestByKeysErrors: no keys is a request without a key (400), a key list
// AllowAll rejects (a key twice) or a cost above a key's Burst a server
// fault (500), and none reaches the handler or spends anything; New
// refuses a nil function, ByKeys beside WithRefunds, and a limiter that
// is not a keyrate.PolicyLimiter.
func TestByKeysErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		keys func(user, org keyrate.Tier) KeysFunc
		code int
	}{
		{"none", func(_, _ keyrate.Tier) KeysFunc {
			return func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) { return keys, nil }
		}, 400},
		{"failed", func(_, _ keyrate.Tier) KeysFunc {
			return func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
				return keys, errors.New("no session")
			}
		}, 500},
		{"twice", func(user, org keyrate.Tier) KeysFunc {
			return func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
				return append(keys, keyrate.KeyCost{Key: "acme", Tier: org}, keyrate.KeyCost{Key: "acme", Tier: user}), nil
			}
		}, 500},
		{"above burst", func(user, org keyrate.Tier) KeysFunc {
			return func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
				return append(keys, keyrate.KeyCost{Key: "acme", Tier: org}, keyrate.KeyCost{Key: "alice", Tier: user, Cost: 2}), nil
			}
		}, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim, h, _, org := byKeysStore(t, c.keys)
			if rec := keysGet(h, "alice"); rec.Code != c.code {
				t.Fatalf("status %d, want %d", rec.Code, c.code)
			}
			if d, _ := lim.PeekTier("acme", org); d.Remaining != 2 {
				t.Fatalf("the organisation was charged: %+v", d)
			}
		})
	}
	lim, _ := atomicbucket.New(keyrate.PerHour(1))
	noop := func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) { return keys, nil }
	for name, opts := range map[string][]Option{
		"nil":     {ByKeys(nil)},
		"refunds": {ByKeys(noop), WithRefunds()},
	} {
		if _, err := New(lim, opts...); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := New(plainLimiter{lim}, ByKeys(noop)); !errors.Is(err, keyrate.ErrInvalidOption) {
		t.Errorf("ByKeys on a plain Limiter: New = %v, want ErrInvalidOption", err)
	}
}

// plainLimiter is a keyrate.Limiter that is not a PolicyLimiter.
type plainLimiter struct{ keyrate.Limiter }

// TestByKeysOneAllocation: ByKeys adds no allocation to the one a
// request costs (its header values), allowed or denied.
func TestByKeysOneAllocation(t *testing.T) {
	for _, burst := range []int{1_000_000, 1} {
		clk := clock.NewManual(0)
		lim, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: burst}, keyrate.WithClock(clk),
			keyrate.WithPolicies(keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerHour(1_000_000)}}))
		if err != nil {
			t.Fatal(err)
		}
		org, _ := lim.Tier("org")
		mw, err := New(lim, WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ keyrate.Decision) { w.WriteHeader(429) }),
			ByKeys(func(_ *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
				return append(keys, keyrate.KeyCost{Key: "user"}, keyrate.KeyCost{Key: "acme", Tier: org}), nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
		r := httptest.NewRequest("GET", "/", nil)
		w := &benchWriter{h: make(http.Header)}
		h.ServeHTTP(w, r)
		n := testing.AllocsPerRun(100, func() {
			clk.Advance(time.Second)
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if n > 1 {
			t.Errorf("burst %d: %v allocations a request, want at most 1", burst, n)
		}
	}
}

// TestByKeysConcurrent: requests of 8 users of one organisation, released
// together on a frozen clock, through one ByKeys middleware (its key
// buffers pooled): no user passes its Burst of 5, the organisation not
// its 20, and every response is 200 or 429.
func TestByKeysConcurrent(t *testing.T) {
	lim, err := atomicbucket.New(keyrate.PerHour(100), keyrate.WithClock(clock.NewManual(0)), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerHour(5)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerHour(20)}},
	))
	if err != nil {
		t.Fatal(err)
	}
	user, _ := lim.Tier("user")
	org, _ := lim.Tier("org")
	mw, err := New(lim, ByKeys(userAndOrg(user, org)))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	const users, each = 8, 12
	var passed [users]atomic.Int64
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(users)
	done.Add(users)
	for u := range users {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			for range each {
				switch code := keysGet(h, fmt.Sprint("user-", u)).Code; code {
				case 200:
					passed[u].Add(1)
				case 429:
				default:
					t.Errorf("status %d", code)
				}
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	total := int64(0)
	for u := range passed {
		n := passed[u].Load()
		if n > 5 {
			t.Errorf("user-%d passed %d, above its Burst of 5", u, n)
		}
		total += n
	}
	if total > 20 || total == 0 {
		t.Errorf("%d passed in all; the organisation's Burst is 20", total)
	}
}

// TestByKeysRefusesInflight checks that New refuses ByKeys beside
// WithInflight, which ServeHTTP would otherwise skip (ByKeys decides
// before the cap is taken): a cap given and silently not enforced.
func TestByKeysRefusesInflight(t *testing.T) {
	store, err := atomicbucket.New(keyrate.Limit{Rate: 10, Per: time.Second, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	slots, err := inflight.New(2)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(r *http.Request, k []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
		return append(k, keyrate.KeyCost{Key: "u"}), nil
	}
	_, err = New(store, ByKeys(keys), WithInflight(slots))
	if !errors.Is(err, keyrate.ErrInvalidOption) || !strings.Contains(err.Error(), "WithInflight") {
		t.Fatalf("New(ByKeys, WithInflight) = %v, want an error wrapping keyrate.ErrInvalidOption naming WithInflight", err)
	}
}
