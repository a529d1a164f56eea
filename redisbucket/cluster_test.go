package redisbucket_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestClusterKilledMaster kills one master of a 3-master Redis Cluster
// (no replicas, so its slots stay down) under a store of each failure
// policy: a key on its slots gets the policy's answer, without hanging,
// counted in Stats; keys on the other masters keep getting Redis's
// answers.
func TestClusterKilledMaster(t *testing.T) {
	cluster := redistest.StartCluster3(t)
	client := newClusterClient(t, cluster)
	victim := cluster.Nodes[0]
	prefix := uniquePrefix(t)
	stores := make([]*redisbucket.Store, len(policyCases))
	dead := make([]string, len(policyCases))   // a key of the victim's, per store
	live := make([][]string, len(policyCases)) // two keys of the others'
	for i, c := range policyCases {
		p := prefix + c.policy.String() + ":"
		stores[i] = mustNew(t, client, faultLimit, append([]keyrate.Option{
			redisbucket.WithFailurePolicy(c.policy),
			redisbucket.WithTimeout(faultTimeout),
			redisbucket.WithTimeSource(clock.NewManual(start)),
			redisbucket.WithPrefix(p),
		}, c.opts...)...)
		answered(t, stores[i], keys("warm-")) // loads the script on a master
		// Keys found by the client's own slot map.
		for n := 0; dead[i] == "" || len(live[i]) < 2; n++ {
			key := fmt.Sprint("k", n)
			m, err := client.MasterForKey(t.Context(), p+key)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case m.Options().Addr == victim.Addr():
				dead[i] = key
			case len(live[i]) < 2:
				live[i] = append(live[i], key)
			}
		}
	}
	victim.Kill()
	for i, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			s := stores[i]
			for n := range 4 {
				before := s.Stats()
				var d keyrate.Decision
				var err error
				timed(t, "a call on the killed master's slots", func() { d, err = s.AllowN(dead[i], 1) })
				c.check(t, n, d, err)
				if st := s.Stats(); st.Errors != before.Errors+1 || st.Degraded != before.Degraded+1 {
					t.Fatalf("a call on the killed master's slots moved Stats from %+v to %+v; want one more error and degraded answer", before, st)
				}
			}
			for _, key := range live[i] {
				for n := range 3 {
					d, err := s.AllowN(key, 1)
					if want := faultLimit.Burst - 1 - n; err != nil || !d.Allowed || d.Remaining != want || d.Limit != faultLimit {
						t.Fatalf("call %d on %q, a live master's key: %+v, %v; want Redis's answer, allowed with %d left", n, key, d, err, want)
					}
				}
			}
		})
	}
}

// TestClusterBreakerPerMaster kills one master of a 3-master Redis
// Cluster (no replicas: its slots stay down) under a store of each
// failure policy with a breaker of 3 failures: three calls on the dead
// master's keys open its breaker, after which its keys are answered by
// the policy at once, sending nothing; the other masters' keys keep
// getting Redis's answers, their breakers closed. (A breaker per store
// answered every master's keys by the policy for the back-off.)
func TestClusterBreakerPerMaster(t *testing.T) {
	cluster := redistest.StartCluster3(t)
	client := newClusterClient(t, cluster)
	victim := cluster.Nodes[0]
	prefix := uniquePrefix(t)
	stores := make([]*redisbucket.Store, len(policyCases))
	seen := make([]*changes, len(policyCases)) // each store's OnError
	dead := make([]string, len(policyCases))   // a key of the victim's, per store
	live := make([][]string, len(policyCases)) // a key of each other master's
	for i, c := range policyCases {
		p := prefix + c.policy.String() + ":"
		seen[i] = new(changes)
		stores[i] = mustNew(t, client, faultLimit, append([]keyrate.Option{
			redisbucket.WithFailurePolicy(c.policy),
			redisbucket.WithTimeout(faultTimeout),
			redisbucket.WithTimeSource(clock.NewManual(start)),
			redisbucket.WithPrefix(p),
			redisbucket.WithOnError(seen[i].add),
			redisbucket.WithBreaker(redisbucket.Breaker{Failures: 3, Clock: clock.NewManual(0)}),
		}, c.opts...)...)
		answered(t, stores[i], keys("warm-")) // loads the script on a master
		masters := map[string]bool{victim.Addr(): true}
		for n := 0; dead[i] == "" || len(live[i]) < 2; n++ {
			key := fmt.Sprint("k", n)
			m, err := client.MasterForKey(t.Context(), p+key)
			if err != nil {
				t.Fatal(err)
			}
			switch addr := m.Options().Addr; {
			case addr == victim.Addr():
				dead[i] = key
			case !masters[addr]:
				masters[addr] = true
				live[i] = append(live[i], key)
			}
		}
	}
	victim.Kill()
	for i, c := range policyCases {
		t.Run(c.policy.String(), func(t *testing.T) {
			s := stores[i]
			warm := s.Stats() // after warming up
			for n := range 3 {
				var d keyrate.Decision
				var err error
				timed(t, "a call on the killed master's slots", func() { d, err = s.AllowN(dead[i], 1) })
				c.check(t, n, d, err)
			}
			if st := s.Stats(); st.Errors != warm.Errors+3 || st.BreakerOpens != 1 || !st.BreakerOpen {
				t.Fatalf("after 3 failures on the killed master's keys: %+v; want 3 errors more, its breaker open", st)
			}
			for _, key := range live[i] {
				for n := range 3 {
					d, err := s.AllowN(key, 1)
					if want := faultLimit.Burst - 1 - n; err != nil || !d.Allowed || d.Remaining != want || d.Limit != faultLimit {
						t.Fatalf("call %d on %q, a live master's key, with the killed master's breaker open: %+v, %v; want Redis's answer, allowed with %d left", n, key, d, err, want)
					}
				}
			}
			if opens, _ := seen[i].counts(); opens != 1 || !strings.Contains(seen[i].lastErr.Error(), victim.Addr()) {
				t.Fatalf("OnError saw %d openings, the last %v; want 1, naming the killed master %s", opens, seen[i].lastErr, victim.Addr())
			}
			before := s.Stats()
			d, err := s.AllowN(dead[i], 1)
			c.check(t, 3, d, err)
			if st := s.Stats(); st.ShortCircuited != before.ShortCircuited+1 || st.Calls != before.Calls || st.ShortCircuited != 1 {
				t.Fatalf("a call on the killed master's keys moved Stats from %+v to %+v; want it refused by the open breaker, the only one refused", before, st)
			}
		})
	}
}

// TestClusterKeys: a store on the cluster writes each key on the master
// that owns its slot (WithHashTag: the slot of the user key), and a key's
// limit holds across every master.
func TestClusterKeys(t *testing.T) {
	client := newClusterClient(t, redistest.SharedCluster(t))
	prefix := uniquePrefix(t)
	s := mustNew(t, client, keyrate.PerHour(2), redisbucket.WithPrefix(prefix), redisbucket.WithHashTag(), redisbucket.WithTimeout(slowTimeout))
	masters := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprint("user-", i)
		for n := range 3 {
			if d, err := s.AllowN(key, 1); err != nil || d.Allowed != (n < 2) {
				t.Fatalf("AllowN(%q) #%d = %+v, %v; want allowed twice, then denied", key, n, d, err)
			}
		}
		m, err := client.MasterForKey(t.Context(), prefix+"{"+key+"}")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := m.Exists(t.Context(), prefix+"{"+key+"}").Result(); err != nil || n != 1 {
			t.Fatalf("the master of %q's slot, %s, does not hold its bucket: %d, %v", key, m.Options().Addr, n, err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys landed on %d masters; want all 3", len(masters))
	}
	var _ redis.UniversalClient = client
}
