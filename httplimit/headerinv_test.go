package httplimit

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// sfItems parses a list of `"name";a=1;b=2` items into name -> params.
func sfItems(t *testing.T, v string) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	if v == "" {
		return out
	}
	for _, item := range strings.Split(v, ", ") {
		parts := strings.Split(item, ";")
		name, err := strconv.Unquote(parts[0])
		if err != nil {
			t.Fatalf("item %q of %q: name: %v", item, v, err)
		}
		ps := map[string]int64{}
		for _, p := range parts[1:] {
			k, val, ok := strings.Cut(p, "=")
			if !ok {
				t.Fatalf("param %q of %q", p, v)
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				t.Fatalf("param %q of %q: not a non-negative integer", p, v)
			}
			ps[k] = n
		}
		out[name] = ps
	}
	return out
}

// TestHeaderInvariantsRandom: random requests of random costs under random
// tiers (every algorithm), with SetPolicy changes between them, on a
// manual clock: every response's fields are non-negative integers, r is
// never above its item's q, a 429 carries Retry-After >= 1 equal to t,
// and the same request retried after exactly Retry-After seconds (nothing
// else happening) is allowed.
func TestHeaderInvariantsRandom(t *testing.T) {
	algs := []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog}
	for _, st := range policyStores {
		t.Run("store="+st.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			mkPolicy := func(name string) keyrate.Policy {
				alg := algs[rng.IntN(len(algs))]
				n := 1 + rng.IntN(2)
				if alg == keyrate.SlidingLog {
					n = 1
				}
				var ls []keyrate.Limit
				for i := 0; i < n; i++ {
					b := 2 + rng.IntN(5)
					per := time.Duration(1+rng.IntN(90)) * 100 * time.Millisecond * time.Duration(1+i*10)
					ls = append(ls, keyrate.Limit{Rate: b, Per: per, Burst: b}.Using(alg))
				}
				return keyrate.Policy{Name: name, Limits: ls}
			}
			clk := clock.NewManual(0)
			var pols []keyrate.Policy
			names := []string{"p1", "p2", "p3"}
			for _, n := range names {
				pols = append(pols, mkPolicy(n))
			}
			l, err := st.new(keyrate.PerMinute(3), keyrate.WithClock(clk), keyrate.WithPolicies(pols...))
			if err != nil {
				t.Skipf("store: %v", err)
			}
			pl := l.(keyrate.PolicyLimiter)
			mw, err := New(pl, ByHeader("X-Key"), TierByHeader("X-Plan"), WithLegacyHeaders(), WithCost(func(r *http.Request) int {
				n, _ := strconv.Atoi(r.Header.Get("X-Cost"))
				return max(n, 1)
			}))
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			do := func(key, plan string, cost int) *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-Key", key)
				req.Header.Set("X-Plan", plan)
				req.Header.Set("X-Cost", strconv.Itoa(cost))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			denied, errs := 0, 0
			defer func() {
				if denied < 100 {
					t.Errorf("only %d denials (%d errors): the test checks too little", denied, errs)
				}
			}()
			for i := 0; i < 3000; i++ {
				if rng.IntN(40) == 0 {
					_ = pl.SetPolicy(mkPolicy(names[rng.IntN(len(names))])) // a store may lack the algorithm
				}
				clk.Advance(time.Duration(rng.IntN(700)) * time.Millisecond)
				key := "k" + strconv.Itoa(rng.IntN(3))
				plan := names[rng.IntN(len(names))]
				cost := 1 + rng.IntN(2)
				rec := do(key, plan, cost)
				hdr := rec.Header()
				if rec.Code == 500 {
					errs++
					continue // a cost above the Burst
				}
				pol := sfItems(t, hdr.Get("RateLimit-Policy"))
				rl := sfItems(t, hdr.Get("RateLimit"))
				if len(rl) != 1 {
					t.Fatalf("step %d: RateLimit %q", i, hdr.Get("RateLimit"))
				}
				for name, ps := range rl {
					q, ok := pol[name]
					if !ok {
						t.Fatalf("step %d: RateLimit %q names no item of RateLimit-Policy %q", i, hdr.Get("RateLimit"), hdr.Get("RateLimit-Policy"))
					}
					if ps["r"] > q["q"] {
						t.Errorf("step %d: r=%d above q=%d (%q, %q)", i, ps["r"], q["q"], hdr.Get("RateLimit"), hdr.Get("RateLimit-Policy"))
					}
					if lim, _ := strconv.ParseInt(hdr.Get("X-RateLimit-Limit"), 10, 64); lim != q["q"] {
						t.Errorf("step %d: X-RateLimit-Limit %d, q %d", i, lim, q["q"])
					}
					if rem, _ := strconv.ParseInt(hdr.Get("X-RateLimit-Remaining"), 10, 64); rem != ps["r"] {
						t.Errorf("step %d: X-RateLimit-Remaining %d, r %d", i, rem, ps["r"])
					}
					if rec.Code == 429 {
						denied++
						ra, err := strconv.ParseInt(hdr.Get("Retry-After"), 10, 64)
						if err != nil || ra < 1 || ra != ps["t"] {
							t.Fatalf("step %d: Retry-After %q, t %d", i, hdr.Get("Retry-After"), ps["t"])
						}
						clk.Advance(time.Duration(ra) * time.Second)
						if again := do(key, plan, cost); again.Code != 200 {
							t.Fatalf("step %d: denied with Retry-After %d; after waiting that, %d with %v", i, ra, again.Code, again.Header())
						}
					} else if rec.Code != 200 {
						t.Fatalf("step %d: status %d", i, rec.Code)
					}
				}
			}
		})
	}
}
