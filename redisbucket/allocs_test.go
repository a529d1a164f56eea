package redisbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// maxAllowAllocs bounds the allocations of one AllowN that Redis answers
// (issue 13: at most 8; the previous version made 24): the call's
// context, the Redis key and its boxing, go-redis's command and reply,
// and go-redis's own health check of the pooled connection (3, which an
// EVALSHA of an empty script makes too).
const maxAllowAllocs = 8

// TestAllowAllocs: an AllowN that Redis answers, allowed or denied, with
// or without WithPipelining, allocates at most maxAllowAllocs times on average, with the background
// context that Allow and AllowN use (two more under the race detector).
func TestAllowAllocs(t *testing.T) {
	client := newClient(t, server(t).Addr())
	s := mustNew(t, client, keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	tight := mustNew(t, client, keyrate.PerHour(1).WithBurst(1),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	tight.Allow("k") // empties the bucket: every call below is denied
	// pipelined's calls, one at a time, go straight out: the batcher adds
	// a mutex and no allocation.
	pipelined := mustNew(t, client, keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout), redisbucket.WithPipelining(redisbucket.Pipelining{}))
	for _, c := range []struct {
		name  string
		store *redisbucket.Store
		want  bool
	}{{"allowed", s, true}, {"denied", tight, false}, {"pipelined", pipelined, true}} {
		c.store.Allow("k") // loads the script, warms the pool
		var failed bool
		n := testing.AllocsPerRun(200, func() {
			if d, err := c.store.AllowN("k", 1); err != nil || d.Allowed != c.want {
				failed = true
			}
		})
		if failed {
			t.Fatalf("%s: AllowN did not answer Allowed=%v without error", c.name, c.want)
		}
		limit := float64(maxAllowAllocs)
		if racetest.Enabled {
			// The race detector drops a quarter of sync.Pool's Puts at
			// random, and instruments more: a call can make two more.
			limit += 2
		}
		if n > limit {
			t.Errorf("%s: AllowN allocates %v times per call; want at most %v", c.name, n, limit)
		}
	}
}

// TestAllowAllocsClusterPipelined: on a Redis Cluster, an AllowN that
// goes straight out under WithPipelining allocates no more than one
// without it, measured in the same run on the same client: looking up
// its key's master and taking and ending one of that master's turns
// (added when the master has no call in flight, dropped when its last
// ends) allocate nothing. (Under the race detector, whose dropped
// sync.Pool Puts land on either store at random, one more: the two
// measures differ by one either way from run to run;
// TestBatcherTurnAllocs counts the batcher's own allocations exactly.)
func TestAllowAllocsClusterPipelined(t *testing.T) {
	client := newClusterClient(t, redistest.SharedCluster(t))
	allocs := func(opts ...keyrate.Option) float64 {
		s := mustNew(t, client, keyrate.PerSecond(1_000_000).WithBurst(1_000_000),
			append(opts, redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))...)
		keys := benchKeys(8) // spread over the masters
		s.Allow(keys[0])     // loads the script, warms the pool
		var failed bool
		i := 0
		n := testing.AllocsPerRun(200, func() {
			if d, err := s.AllowN(keys[i%len(keys)], 1); err != nil || !d.Allowed {
				failed = true
			}
			i++
		})
		if failed {
			t.Fatal("AllowN did not answer Allowed=true without error")
		}
		return n
	}
	plain := allocs()
	pipelined := allocs(redisbucket.WithPipelining(redisbucket.Pipelining{}))
	limit := plain
	if racetest.Enabled {
		limit++
	}
	if pipelined > limit {
		t.Errorf("AllowN on a Cluster allocates %v times per call with WithPipelining, %v without; want at most %v", pipelined, plain, limit)
	}
}
