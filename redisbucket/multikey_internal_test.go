package redisbucket

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestKeySlot checks keySlot, AllowAllContext's test of whether its keys
// share a Cluster slot, against the server's own CLUSTER KEYSLOT: keys
// with and without hash tags, an empty tag ("{}" hashes the key whole),
// a tag that is not closed, and a second tag (only the first counts).
func TestKeySlot(t *testing.T) {
	c := redistest.SharedCluster(t)
	client := redis.NewClient(&redis.Options{Addr: c.Addrs()[0]})
	defer client.Close()
	keys := []string{"", "a", "keyrate:user:alice", "keyrate:{acme}:user:alice", "keyrate:{acme}:org",
		"x{}y", "{}", "{a", "a}b{", "a{b}{c}", "{{b}}", "123456789", "keyrate:{user:42}"}
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("k%d", i), fmt.Sprintf("p{t%d}s", i))
	}
	for _, k := range keys {
		want, err := client.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keySlot(k); int64(got) != want {
			t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}
