package redisbucket_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// evictingPolicies are Redis 7's maxmemory-policy values other than
// noeviction: each may evict a bucket key, since every one has a TTL.
var evictingPolicies = []string{
	"volatile-lru", "allkeys-lru", "volatile-lfu", "allkeys-lfu",
	"volatile-random", "allkeys-random", "volatile-ttl",
}

// errorLog collects what a store passes to its OnError callback.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorLog) option() keyrate.Option {
	return redisbucket.WithOnError(func(err error) {
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
	})
}

func (l *errorLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// configGets returns how many CONFIG GET calls the server has served.
func configGets(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_config\|get:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestEvictingPolicyRefused: New refuses a server whose maxmemory-policy
// may evict bucket keys, naming the policy, the server and the opt-in;
// with the opt-in it does not check (nothing is sent) and the store works.
func TestEvictingPolicyRefused(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := t.Context()
	for _, p := range evictingPolicies {
		if err := client.ConfigSet(ctx, "maxmemory-policy", p).Err(); err != nil {
			t.Fatal(err)
		}
		var log errorLog
		s, err := redisbucket.New(client, keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout), log.option())
		if s != nil || !errors.Is(err, redisbucket.ErrEvictingPolicy) {
			t.Fatalf("%s: New = %v, %v; want nil and an error wrapping ErrEvictingPolicy", p, s, err)
		}
		for _, part := range []string{"maxmemory-policy " + p, srv.Addr(), "noeviction", "redisbucket.WithEvictionAllowed"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: New's error %q does not say %q", p, err, part)
			}
		}
		if errs := log.all(); len(errs) != 0 {
			t.Errorf("%s: OnError got %v; the refusal is New's error, not a callback", p, errs)
		}

		before := configGets(t, client)
		s, err = redisbucket.New(client, keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout),
			redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithEvictionAllowed())
		if err != nil {
			t.Fatalf("%s: New with WithEvictionAllowed: %v", p, err)
		}
		if n := configGets(t, client) - before; n != 0 {
			t.Errorf("%s: New with WithEvictionAllowed sent %d CONFIG GET, want none", p, n)
		}
		if err := s.PolicyCheck(); !errors.Is(err, redisbucket.ErrPolicyUnchecked) || !strings.Contains(err.Error(), "WithEvictionAllowed") {
			t.Errorf("%s: PolicyCheck = %v, want ErrPolicyUnchecked naming WithEvictionAllowed", p, err)
		}
		if d, err := s.AllowN("k", 1); !d.Allowed || err != nil {
			t.Errorf("%s: AllowN with WithEvictionAllowed = %+v, %v; want allowed", p, d, err)
		}
	}

	if err := client.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	var log errorLog
	before := configGets(t, client)
	s := mustNew(t, client, keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout), log.option())
	if n := configGets(t, client) - before; n != 1 {
		t.Errorf("New sent %d CONFIG GET, want 1", n)
	}
	if err := s.PolicyCheck(); err != nil {
		t.Errorf("PolicyCheck under noeviction = %v, want nil", err)
	}
	if errs := log.all(); len(errs) != 0 || s.Stats() != (redisbucket.Stats{}) {
		t.Errorf("OnError got %v, Stats %+v; want nothing: New's check is no call", errs, s.Stats())
	}
}

// TestPolicyUnchecked: when New cannot read the policy (CONFIG renamed away
// or denied by an ACL, as managed services do; the server unreachable or
// too slow) the store still starts, and reports it through PolicyCheck and
// the OnError callback, not through Stats.
func TestPolicyUnchecked(t *testing.T) {
	type outcome struct {
		unavailable bool   // the cause wraps ErrUnavailable
		says        string // a part of the message
	}
	check := func(t *testing.T, s *redisbucket.Store, log *errorLog, want outcome) {
		t.Helper()
		err := s.PolicyCheck()
		if !errors.Is(err, redisbucket.ErrPolicyUnchecked) || errors.Is(err, redisbucket.ErrUnavailable) != want.unavailable ||
			!strings.Contains(err.Error(), want.says) {
			t.Errorf("PolicyCheck = %v; want ErrPolicyUnchecked, ErrUnavailable %v, saying %q", err, want.unavailable, want.says)
		}
		if errs := log.all(); len(errs) != 1 || errs[0].Error() != err.Error() {
			t.Errorf("OnError got %v; want PolicyCheck's error once", errs)
		}
		if st := s.Stats(); st != (redisbucket.Stats{}) {
			t.Errorf("Stats = %+v after New, want zero: the check is not a call", st)
		}
	}

	t.Run("CONFIG renamed", func(t *testing.T) {
		srv := redistest.Start(t, "--rename-command", "CONFIG", "")
		var log errorLog
		s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout),
			redisbucket.WithPrefix(uniquePrefix(t)), log.option())
		check(t, s, &log, outcome{false, "unknown command"})
		if d, err := s.AllowN("k", 1); !d.Allowed || err != nil {
			t.Errorf("AllowN = %+v, %v; want Redis's answer", d, err)
		}
	})
	t.Run("CONFIG denied by ACL", func(t *testing.T) {
		srv := server(t)
		admin := newClient(t, srv.Addr())
		if err := admin.Do(t.Context(), "ACL", "SETUSER", "app", "on", ">secret", "+@all", "~*", "-config").Err(); err != nil {
			t.Fatal(err)
		}
		app := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "secret", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = app.Close() })
		var log errorLog
		s := mustNew(t, app, keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout),
			redisbucket.WithPrefix(uniquePrefix(t)), log.option())
		check(t, s, &log, outcome{false, "NOPERM"})
	})
	t.Run("unreachable", func(t *testing.T) {
		var log errorLog
		s := mustNew(t, newClient(t, unreachable), keyrate.PerHour(5), log.option())
		check(t, s, &log, outcome{true, unreachable})
	})
	t.Run("paused", func(t *testing.T) {
		// The server takes every command in only after the pause, far past
		// the timeout: New's check cannot finish, however busy the machine.
		srv := server(t)
		srv.Pause(t, time.Hour)
		var log errorLog
		s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(5), redisbucket.WithTimeout(100*time.Millisecond), log.option())
		check(t, s, &log, outcome{true, "deadline exceeded"})
	})
}

// TestPolicyCheckRing checks every shard of a Ring, and names the one that
// may evict.
func TestPolicyCheckRing(t *testing.T) {
	a, b := server(t), server(t)
	newRing := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	s := mustNew(t, newRing(), keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout))
	if err := s.PolicyCheck(); err != nil {
		t.Errorf("PolicyCheck with two noeviction shards = %v, want nil", err)
	}
	if err := newClient(t, b.Addr()).ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisbucket.New(newRing(), keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout))
	if s != nil || !errors.Is(err, redisbucket.ErrEvictingPolicy) || !strings.Contains(err.Error(), b.Addr()+" has maxmemory-policy allkeys-lru") ||
		strings.Contains(err.Error(), a.Addr()) {
		t.Errorf("New on a Ring with one evicting shard = %v, %v; want ErrEvictingPolicy naming %s only", s, err, b.Addr())
	}
}

// TestPolicyCheckCluster checks the nodes of a Cluster (here one node that
// holds every slot).
func TestPolicyCheckCluster(t *testing.T) {
	srv := redistest.StartCluster(t)
	newCluster := func() *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	s := mustNew(t, newCluster(), keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout), redisbucket.WithPrefix(uniquePrefix(t)))
	if err := s.PolicyCheck(); err != nil {
		t.Errorf("PolicyCheck on a noeviction cluster = %v, want nil", err)
	}
	if d, err := s.AllowN("k", 1); !d.Allowed || d.Remaining != 4 || err != nil {
		t.Errorf("AllowN on the cluster = %+v, %v; want allowed with 4 left", d, err)
	}
	if err := newClient(t, srv.Addr()).ConfigSet(t.Context(), "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisbucket.New(newCluster(), keyrate.PerHour(5), redisbucket.WithTimeout(slowTimeout))
	if s != nil || !errors.Is(err, redisbucket.ErrEvictingPolicy) || !strings.Contains(err.Error(), "maxmemory-policy volatile-ttl") {
		t.Errorf("New on an evicting cluster = %v, %v; want ErrEvictingPolicy", s, err)
	}
}

// TestEvictionOverAdmits is why New refuses an evicting policy: under
// volatile-lru (WithEvictionAllowed), an attacker that spends on new keys
// until Redis runs out of memory gets a victim's emptied bucket evicted,
// and the victim is admitted again, above its limit, at the same instant.
func TestEvictionOverAdmits(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-lru")
	client := newClient(t, srv.Addr())
	prefix := uniquePrefix(t)
	limit := keyrate.PerHour(5)
	s := mustNew(t, client, limit, redisbucket.WithTimeout(slowTimeout), redisbucket.WithPrefix(prefix),
		redisbucket.WithTimeSource(clock.NewManual(start)), redisbucket.WithEvictionAllowed())
	admitted := 0
	for range limit.Burst + 1 {
		if s.Allow("victim") {
			admitted++
		}
	}
	if admitted != limit.Burst {
		t.Fatalf("the victim was admitted %d times before the attack, want %d", admitted, limit.Burst)
	}
	const most = 1_000_000
	for i := 0; ; i++ {
		if i == most {
			t.Fatalf("%d attacker keys did not get the victim's bucket evicted", most)
		}
		if _, err := s.AllowN(fmt.Sprint("attacker-", i), 1); err != nil {
			t.Fatalf("attacker call %d: %v", i, err)
		}
		if i%100 == 0 {
			if n, err := client.Exists(t.Context(), prefix+"victim").Result(); err != nil || n == 0 {
				t.Logf("the victim's bucket was evicted after %d attacker keys", i+1)
				break
			}
		}
	}
	if !s.Allow("victim") {
		t.Fatal("the victim was denied after its bucket's eviction: the attack did not work")
	}
	t.Logf("the victim was admitted %d times at one instant under a burst of %d", admitted+1, limit.Burst)
}
