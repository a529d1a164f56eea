package redisbucket_test

import (
	"errors"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestAllowAllWindows checks Store.AllowAll's one call with window
// algorithms (whose replies end with the server's now) beside a token
// bucket: each answer, and every key's PeekTier after it, equals that of
// keyrate.AllowAll (the two-step, each key its own script call) on a twin
// store of the same server and clock, at the start, the middle and the
// end of the windows. Where both keys deny, the user's (listed first, and
// checked first by the two-step) is named by both.
func TestAllowAllWindows(t *testing.T) {
	srv := server(t)
	clk := clock.NewManual(unixStart)
	pols := []keyrate.Policy{
		{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(4).Using(keyrate.FixedWindow)}},
		{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2).Using(keyrate.SlidingWindow), keyrate.PerSecond(5)}},
	}
	open := func() (*redisbucket.Store, keyrate.Tier, keyrate.Tier) {
		s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(100), keyrate.WithPolicies(pols...),
			redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
		org, _ := s.Tier("org")
		user, _ := s.Tier("user")
		return s, org, user
	}
	one, org1, user1 := open()
	two, org2, user2 := open()
	var allowed, denied int
	for step, at := range []time.Duration{0, 0, 0, 10 * time.Second, 30 * time.Second, 59 * time.Second, time.Minute, time.Minute, 90 * time.Second, 90 * time.Second} {
		clk.Set(unixStart + at)
		who := []string{"alice", "bob"}[step%2]
		d1, err1 := one.AllowAll([]keyrate.KeyCost{{Key: "user:" + who, Tier: user1, Cost: 1}, {Key: "org", Tier: org1, Cost: 1}})
		d2, err2 := keyrate.AllowAll(two, []keyrate.KeyCost{{Key: "user:" + who, Tier: user2, Cost: 1}, {Key: "org", Tier: org2, Cost: 1}})
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Fatalf("step %d at +%v: one call %+v, %v; two-step %+v, %v", step, at, d1, err1, d2, err2)
		}
		if d1.Allowed {
			allowed++
		} else {
			denied++
		}
		for _, k := range []struct {
			key    string
			t1, t2 keyrate.Tier
		}{{"user:alice", user1, user2}, {"user:bob", user1, user2}, {"org", org1, org2}} {
			p1, _ := one.PeekTier(k.key, k.t1)
			p2, _ := two.PeekTier(k.key, k.t2)
			if p1 != p2 {
				t.Fatalf("step %d at +%v: %s after the one call %+v, after the two-step %+v", step, at, k.key, p1, p2)
			}
		}
	}
	if allowed == 0 || denied == 0 {
		t.Fatalf("%d allowed and %d denied: the schedule should do both", allowed, denied)
	}
}

// TestAllowAllFailure checks Store.AllowAll when Redis does not answer:
// each failure policy answers for the whole request (FailClosed denies
// with ErrUnavailable, FailOpen allows, FallbackLocal decides every key
// in its fallback store, all or nothing), and the call is counted as an
// error.
func TestAllowAllFailure(t *testing.T) {
	for _, c := range []struct {
		policy  redisbucket.FailurePolicy
		allowed []bool // three requests of the user (Burst 2 in the fallback)
		err     error
	}{
		{redisbucket.FailClosed, []bool{false, false, false}, redisbucket.ErrUnavailable},
		{redisbucket.FailOpen, []bool{true, true, true}, nil},
		{redisbucket.FallbackLocal, []bool{true, true, false}, nil},
	} {
		t.Run(c.policy.String(), func(t *testing.T) {
			srv := server(t)
			pols := []keyrate.Policy{
				{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(2)}},
				{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(10)}},
			}
			s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(100), keyrate.WithPolicies(pols...),
				redisbucket.WithFailurePolicy(c.policy), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(faultTimeout))
			user, _ := s.Tier("user")
			org, _ := s.Tier("org")
			srv.Kill()
			before := s.Stats()
			for i, want := range c.allowed {
				d, err := s.AllowAll([]keyrate.KeyCost{{Key: "user:alice", Tier: user, Cost: 1}, {Key: "org:acme", Tier: org, Cost: 1}})
				if d.Allowed != want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
					t.Fatalf("request %d with Redis down: %+v, %v; want allowed %v, error %v", i, d, err, want, c.err)
				}
			}
			if st := s.Stats(); st.Errors-before.Errors != uint64(len(c.allowed)) || st.Degraded-before.Degraded != uint64(len(c.allowed)) {
				t.Fatalf("Stats after %d failed requests: %+v, before %+v", len(c.allowed), st, before)
			}
		})
	}
}
