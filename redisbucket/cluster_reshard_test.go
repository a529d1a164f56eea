package redisbucket_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestClusterReshard: a key's slot moves to another master while its
// calls go on, pipelined through one turn: first with the key migrated
// and the slot still the old master's (it answers ASK; the new master,
// which never ran the script, answers NOSCRIPT), then with the slot the
// new master's (the client's map is stale: MOVED). Every call is
// answered without error, and the key admits exactly its Burst over the
// whole move on a frozen clock, then one token an hour later: no state
// lost to the move, none counted twice.
func TestClusterReshard(t *testing.T) {
	const burst = 10
	c := redistest.StartCluster3(t)
	cc := newClusterClient(t, c)
	ctx := t.Context()
	tm := clock.NewManual(start)
	prefix := uniquePrefix(t)
	s := mustNew(t, cc, keyrate.PerHour(1).WithBurst(burst), redisbucket.WithPrefix(prefix),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(tm),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4}))
	rk := prefix + "k" // the key's Redis key
	var admitted atomic.Int32
	spend := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				d, err := s.AllowN("k", 1)
				if err != nil {
					t.Errorf("AllowN during the move: %+v, %v", d, err)
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}()
		}
		close(release)
		wg.Wait()
	}
	spend(4)

	slot, err := cc.ClusterKeySlot(ctx, rk).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, err := cc.MasterForKey(ctx, rk)
	if err != nil {
		t.Fatal(err)
	}
	var dst *redis.Client
	for _, a := range c.Addrs() {
		if a != src.Options().Addr {
			dst = newClient(t, a)
			break
		}
	}
	id := func(n *redis.Client) string {
		v, err := n.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	srcID, dstID := id(src), id(dst)
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	for _, cmd := range [][]any{
		{dst, "cluster", "setslot", slot, "importing", srcID},
		{src, "cluster", "setslot", slot, "migrating", dstID},
		{src, "migrate", host, port, rk, 0, 5000},
	} {
		if err := cmd[0].(*redis.Client).Do(ctx, cmd[1:]...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd[1:], err)
		}
	}
	spend(4) // ASK: the key is on dst, the slot still src's

	for _, a := range c.Addrs() {
		if err := newClient(t, a).Do(ctx, "cluster", "setslot", slot, "node", dstID).Err(); err != nil {
			t.Fatalf("setslot node at %s: %v", a, err)
		}
	}
	spend(4) // MOVED: the client's map is stale

	if n := admitted.Load(); n != burst {
		t.Errorf("%d admitted over the move on a frozen clock; want the burst, %d", n, burst)
	}
	tm.Advance(time.Hour)
	spend(3)
	if n := admitted.Load(); n != burst+1 {
		t.Errorf("%d admitted an hour later; want one more, %d", n, burst+1)
	}
}
