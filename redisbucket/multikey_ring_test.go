package redisbucket_test

import (
	"fmt"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestAllowAllRingSameSlotOtherShard: a redis.Ring shards by the hash tag
// (or the whole key), not by the Cluster hash slot, so two keys without
// tags that share a slot by chance may live on two shards. AllowAll must
// not decide them in one script call on the first key's shard: there the
// second key is absent, a full bucket, while its real bucket, on its own
// shard, is empty. On the broken code the request is allowed: the second
// key admits twice its Burst of 1.
func TestAllowAllRingSameSlotOtherShard(t *testing.T) {
	a, b := server(t), server(t)
	ring := newRingClient(t, map[string]string{"a": a.Addr(), "b": b.Addr()})
	onA := newClient(t, a.Addr())
	prefix := uniquePrefix(t)
	s := mustNew(t, ring, keyrate.PerHour(1), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
	// Find two keys in one slot whose buckets are on two shards: a spend
	// through the Ring shows which shard holds a key.
	shardA := func(k string) bool {
		if _, err := s.AllowN(k, 1); err != nil {
			t.Fatal(err)
		}
		n, err := onA.Exists(t.Context(), prefix+k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	bySlot := map[int]string{}
	var k1, k2 string
	for i := 0; k1 == "" && i < 100000; i++ {
		k := fmt.Sprintf("u%d", i)
		sl := redisbucket.KeySlot(prefix + k)
		if other, ok := bySlot[sl]; ok {
			if shardA(other) != shardA(k) {
				k1, k2 = other, k
			}
			continue
		}
		bySlot[sl] = k
	}
	if k1 == "" {
		t.Fatal("no two keys of one slot on two shards")
	}
	// k2 is spent (its Burst is 1), k1 full again: a request on both
	// must be denied by k2.
	if err := ring.Del(t.Context(), prefix+k1).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := s.AllowAll([]keyrate.KeyCost{{Key: k1, Cost: 1}, {Key: k2, Cost: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Index != 1 {
		t.Fatalf("AllowAll(%q, %q) on a Ring, key 1 spent = %+v; want denied by key 1: the one script call ran on %q's shard, where %q's bucket is not", k1, k2, d, k1, k2)
	}
}
