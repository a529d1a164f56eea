package redisbucket_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// floodKeys is the number of denied keys of the flood test.
const floodKeys = 1000

// evalCount returns how many EVALSHA and EVAL commands log holds since n.
func evalCount(log *commandLog, n int) int {
	c := 0
	for _, name := range log.since(n) {
		if name == "evalsha" || name == "eval" {
			c++
		}
	}
	return c
}

// TestDenyCacheFlood: under a flood of requests on 1 000 keys whose
// buckets are empty, Redis sees one call per key per retry interval
// (counted by a go-redis hook), and one per request on the few keys a
// full bucket of the cache has no room for (counted from the cache's own
// layout, since its hash seed is random); every key's first request once its token
// is back reaches Redis and is allowed (the cache denies no longer than
// Redis would); every request the cache answers is denied, with the
// Decision Redis would give.
func TestDenyCacheFlood(t *testing.T) {
	var log commandLog
	client := newClient(t, server(t).Addr())
	client.AddHook(&log)
	clk := clock.NewManual(unixStart)
	limit := keyrate.PerSecond(1).WithBurst(1)
	opts := []keyrate.Option{redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}
	s := mustNew(t, client, limit, append(opts, redisbucket.WithDenyCache(floodKeys))...)
	ref := mustNew(t, client, limit, opts...) // the same buckets, no cache: what Redis answers
	keys := make([]string, floodKeys)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	if _, err := ref.AllowN("load", 1); err != nil { // loads the script: each call below is one EVALSHA
		t.Fatal(err)
	}
	const rounds = 5
	// A bucket of the cache may overflow: a key it has no room for goes
	// to Redis in every round.
	overflow := redisbucket.DenyCacheOverflow(s, keys)
	if overflow > floodKeys/50 {
		t.Fatalf("the deny cache of %d keys has no room for %d of them", floodKeys, overflow)
	}
	maxCalls := floodKeys + (rounds-1)*overflow
	for interval := range 3 {
		n, local := log.len(), s.Stats().DeniedLocally
		for round := range rounds {
			for _, k := range keys {
				d, err := s.AllowN(k, 1)
				if err != nil {
					t.Fatal(err)
				}
				if round == 0 && !d.Allowed {
					t.Fatalf("interval %d: AllowN(%q) = %+v: the first request once the token is back was denied", interval, k, d)
				}
				if round > 0 && d.Allowed {
					t.Fatalf("interval %d, round %d: AllowN(%q) allowed a second request in one interval", interval, round, k)
				}
			}
		}
		calls := evalCount(&log, n)
		t.Logf("interval %d: %d requests, %d calls to Redis (%d keys left out), %d denied locally", interval, rounds*floodKeys, calls, overflow, s.Stats().DeniedLocally-local)
		if calls < floodKeys || calls > maxCalls {
			t.Fatalf("interval %d: Redis saw %d calls for %d requests on %d keys; want from %d to %d", interval, calls, rounds*floodKeys, floodKeys, floodKeys, maxCalls)
		}
		if got := s.Stats().DeniedLocally - local; got < uint64(rounds*floodKeys-maxCalls) {
			t.Fatalf("interval %d: Stats.DeniedLocally grew by %d; want at least %d", interval, got, rounds*floodKeys-maxCalls)
		}
		// The Decision of a cached denial is Redis's, at a later reading.
		clk.Advance(300 * time.Millisecond)
		for _, k := range keys[:20] {
			d, err := s.AllowN(k, 1)
			if err != nil {
				t.Fatal(err)
			}
			w := ref.Peek(k)
			w.Allowed, w.Remaining = false, 0
			if d != w {
				t.Fatalf("interval %d: a cached denial of %q = %+v; Redis's is %+v", interval, k, d, w)
			}
		}
		clk.Advance(700 * time.Millisecond) // the token is back
	}
}

// TestDenyCacheFullBucket: a flood on one key more than a bucket of the
// cache holds (WithDenyCache(2) is one bucket of 8) costs Redis one call
// per request on the key left out, and no more: the keys the bucket holds
// keep their entries while those deny, whether the keys' denials end at
// the same moment or one after another. A cache that evicts a live entry
// for the newcomer thrashes: the evicted key's next request evicts
// another, so each round costs two calls or more.
func TestDenyCacheFullBucket(t *testing.T) {
	for _, stagger := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprint("stagger=", stagger), func(t *testing.T) {
			client := newClient(t, server(t).Addr())
			clk := clock.NewManual(unixStart)
			s := mustNew(t, client, keyrate.PerSecond(1).WithBurst(1), redisbucket.WithTimeSource(clk),
				redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout), redisbucket.WithDenyCache(2))
			keys := make([]string, 9)
			for i := range keys {
				keys[i] = fmt.Sprint("key-", i)
				if d, err := s.AllowN(keys[i], 1); err != nil || !d.Allowed {
					t.Fatalf("AllowN(%q) = %+v, %v; want the burst's token", keys[i], d, err)
				}
				clk.Advance(stagger) // each key's token comes back this much later
			}
			const rounds = 4
			calls := s.Stats().Calls
			for round := range rounds {
				for _, k := range keys {
					if d, err := s.AllowN(k, 1); err != nil || d.Allowed {
						t.Fatalf("round %d: AllowN(%q) = %+v, %v; want denied", round, k, d, err)
					}
				}
			}
			if got := s.Stats().Calls - calls; got != rounds {
				t.Fatalf("%d rounds on %d keys of one bucket of %d sent %d calls to Redis; want %d, one a round for the key left out",
					rounds, len(keys), len(keys)-1, got, rounds)
			}
		})
	}
}

// TestDenyCacheServerTime: on the server's clock too, a flood on denied
// keys costs Redis one call per key, and the denials are Redis's.
func TestDenyCacheServerTime(t *testing.T) {
	var log commandLog
	client := newClient(t, server(t).Addr())
	client.AddHook(&log)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(1), redisbucket.WithDenyCache(100),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		s.Allow(keys[i]) // empties it: cached, since no token is left
	}
	n := log.len()
	const rounds = 10
	for range rounds {
		for _, k := range keys {
			d, err := s.AllowN(k, 1)
			if err != nil || d.Allowed || d.RetryAfter <= 59*time.Minute || d.RetryAfter > time.Hour {
				t.Fatalf("AllowN(%q) = %+v, %v; want denied for about an hour", k, d, err)
			}
		}
	}
	// Only a key that a full bucket of the cache has no room for (its hash
	// seed is random) is asked of Redis, once a round.
	overflow := redisbucket.DenyCacheOverflow(s, keys)
	if calls := evalCount(&log, n); calls > rounds*overflow {
		t.Fatalf("Redis saw %d calls for %d requests on %d denied keys, %d of them left out of the cache; want at most %d",
			calls, rounds*len(keys), len(keys), overflow, rounds*overflow)
	}
}

// TestDenyCacheAllocs: a request the cache denies allocates nothing and
// sends nothing.
func TestDenyCacheAllocs(t *testing.T) {
	client := newClient(t, server(t).Addr())
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(1), redisbucket.WithDenyCache(16),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	s.Allow("k")
	calls := s.Stats().Calls
	var allowed bool
	if n := testing.AllocsPerRun(1000, func() {
		d, _ := s.AllowN("k", 1)
		allowed = allowed || d.Allowed
	}); n != 0 {
		t.Errorf("a request the cache denies allocates %v times; want 0", n)
	}
	if allowed {
		t.Fatal("a request on an empty bucket was allowed")
	}
	if got := s.Stats().Calls; got != calls {
		t.Fatalf("the cache's denials sent %d calls to Redis; want 0", got-calls)
	}
}

// TestDenyCacheRefund: the store's own Refund drops the key's entry, so
// the refunded token is admitted at once; another process's refund is not
// seen until the cached state would allow the request (as WithDenyCache
// documents), and never makes the cache admit anything.
func TestDenyCacheRefund(t *testing.T) {
	client := newClient(t, server(t).Addr())
	clk := clock.NewManual(unixStart)
	limit := keyrate.PerSecond(1).WithBurst(2)
	prefix := redisbucket.WithPrefix(uniquePrefix(t))
	opts := []keyrate.Option{redisbucket.WithTimeSource(clk), prefix, redisbucket.WithTimeout(slowTimeout), redisbucket.WithDenyCache(16)}
	s := mustNew(t, client, limit, opts...)
	other := mustNew(t, client, limit, opts...)
	step := func(what string, store *redisbucket.Store, want bool) {
		t.Helper()
		if d, err := store.AllowN("k", 1); err != nil || d.Allowed != want {
			t.Fatalf("%s: AllowN = %+v, %v; want Allowed %v", what, d, err, want)
		}
	}
	step("the burst", s, true)
	step("the burst's second token", s, true)
	step("empty", s, false)
	if err := s.Refund("k", 1); err != nil {
		t.Fatal(err)
	}
	step("after its own refund", s, true)
	step("empty again", s, false)
	if err := other.Refund("k", 1); err != nil {
		t.Fatal(err)
	}
	step("after another store's refund, still cached", s, false)
	clk.Advance(time.Second)
	step("a second later, asking Redis: the refunded token and the new one", s, true)
	step("the second token", s, true)
	step("empty once more", s, false)
}

// TestDenyCacheTiers: a key the cache denies under one policy is asked of
// Redis under another, and the answer replaces its entry, so that going
// back to the first policy asks Redis again (which carries the key over).
func TestDenyCacheTiers(t *testing.T) {
	var log commandLog
	client := newClient(t, server(t).Addr())
	client.AddHook(&log)
	clk := clock.NewManual(unixStart)
	big := keyrate.Policy{Name: "big", Limits: []keyrate.Limit{keyrate.PerSecond(1000).WithBurst(1000)}}
	s := openWait(t, client, keyrate.PerHour(1).WithBurst(1), clk, redisbucket.WithDenyCache(16), keyrate.WithPolicies(big))
	tier, err := s.Tier("big")
	if err != nil {
		t.Fatal(err)
	}
	s.Allow("k")
	n := log.len()
	if s.Allow("k") {
		t.Fatal("an empty bucket allowed a request")
	}
	if c := evalCount(&log, n); c != 0 {
		t.Fatalf("the cached denial sent %d calls", c)
	}
	if d, err := s.AllowTier("k", tier, 1); err != nil || !d.Allowed {
		t.Fatalf("AllowTier under big = %+v, %v; want allowed (carried over: 1 token of debt of 1000)", d, err)
	}
	clk.Advance(2 * time.Millisecond) // big refills its token
	n = log.len()
	s.Allow("k") // asks Redis: the entry is big's now
	if c := evalCount(&log, n); c != 1 {
		t.Fatalf("a request under the default policy after one under big sent %d calls; want 1", c)
	}
}
