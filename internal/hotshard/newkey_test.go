package hotshard

import (
	"math"
	"testing"
	"time"
)

// TestNewKeyShardCounts: NewKey takes any shard count and lifetime: 0 or
// less is one shard and the default lifetime, a count above MaxShards is
// MaxShards (a huge one made NextPow2 loop for ever), and the mask covers
// every shard.
func TestNewKeyShardCounts(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{0, 1}, {-1, 1}, {math.MinInt, 1}, {1, 1}, {3, 4}, {16, 16},
		{MaxShards, MaxShards}, {MaxShards + 1, MaxShards}, {math.MaxInt, MaxShards},
	} {
		k := NewKey(c.in, -time.Second)
		if len(k.shards) != c.want || int(k.mask) != c.want-1 || k.lifetime != Lifetime {
			t.Errorf("NewKey(%d, -1s): %d shards, mask %#x, lifetime %v; want %d shards, lifetime %v",
				c.in, len(k.shards), k.mask, k.lifetime, c.want, Lifetime)
		}
	}
}
