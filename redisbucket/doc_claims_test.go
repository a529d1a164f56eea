package redisbucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
)

// README and WithPrefix/WithHashTag: "Keys are keyrate:<key> (WithPrefix,
// WithHashTag) ... and expire once their bucket is full again"; "the key for
// user key k is prefix+k (or prefix+"{"+k+"}" with WithHashTag)". Checked on a
// real server, which is otherwise empty.
func TestClaimRedisKeys(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := context.Background()
	def := mustNew(t, client, keyrate.PerMinute(6), redisbucket.WithTimeout(slowTimeout))
	tagged := mustNew(t, client, keyrate.PerMinute(6), redisbucket.WithTimeout(slowTimeout), redisbucket.WithPrefix("app:"), redisbucket.WithHashTag())
	unique := "claim-" + uniquePrefix(t)
	if !def.Allow(unique) || !tagged.Allow(unique) {
		t.Fatal("first requests denied")
	}
	for _, c := range []struct {
		key string
		ttl time.Duration // at most: the fill time after one spend of 6 a minute
	}{
		{redisbucket.DefaultPrefix + unique, 10 * time.Second},
		{"app:{" + unique + "}", 10 * time.Second},
	} {
		ttl, err := client.PTTL(ctx, c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > c.ttl {
			t.Errorf("key %q: PTTL %v, want it to exist and expire within %v (when its bucket is full again)", c.key, ttl, c.ttl)
		}
	}
	if redisbucket.DefaultPrefix != "keyrate:" || redisbucket.DefaultTimeout != 50*time.Millisecond {
		t.Errorf("DefaultPrefix %q, DefaultTimeout %v; the README says keyrate: and 50ms", redisbucket.DefaultPrefix, redisbucket.DefaultTimeout)
	}
	if n, err := def.LenContext(ctx); err != nil || n != 1 {
		t.Errorf("LenContext under the default prefix = %d, %v; want 1", n, err)
	}
}
