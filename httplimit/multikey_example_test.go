package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/httplimit"
)

// ByKeys limits each request on its user and its organisation at once:
// a user 2 a minute, an organisation 3. A request its user's limit
// denies is not charged to the organisation, so bob still gets its
// share; the observer says which key denied, the response does not.
func ExampleByKeys() {
	clk := clock.NewManual(0) // omit WithClock in production
	limiter, err := atomicbucket.New(keyrate.PerMinute(100), keyrate.WithClock(clk), keyrate.WithPolicies(
		keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2)}},
		keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(3)}},
	))
	if err != nil {
		panic(err)
	}
	user, _ := limiter.Tier("user")
	org, _ := limiter.Tier("org")
	limit, err := httplimit.New(limiter,
		httplimit.ByKeys(func(r *http.Request, keys []keyrate.KeyCost) ([]keyrate.KeyCost, error) {
			// In production, the user and organisation authentication found.
			return append(keys,
				keyrate.KeyCost{Key: "user:" + r.Header.Get("X-User"), Tier: user},
				keyrate.KeyCost{Key: "org:" + r.Header.Get("X-Org"), Tier: org},
			), nil
		}),
		httplimit.WithObserver(keyrate.ObserverFunc(func(e keyrate.Event) {
			if !e.Allowed {
				fmt.Printf("  denied by %s (%s)\n", e.Key, e.Policy)
			}
		})))
	if err != nil {
		panic(err)
	}
	h := limit(http.NotFoundHandler())
	for _, who := range []string{"alice", "alice", "alice", "bob", "bob"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User", who)
		r.Header.Set("X-Org", "acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Println(who, rec.Code, rec.Header().Get("RateLimit"))
	}
	// Output:
	// alice 404 "user";r=1;t=30
	// alice 404 "user";r=0;t=60
	//   denied by user:alice (user)
	// alice 429 "user";r=0;t=30
	// bob 404 "org";r=0;t=60
	//   denied by org:acme (org)
	// bob 429 "org";r=0;t=20
}
