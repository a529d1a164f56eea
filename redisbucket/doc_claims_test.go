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

// The second Cancel of a reservation after a later reservation took its
// slot again (see the root package's
// TestClaimSecondCancelAfterAnotherReservation): on a real server.
func TestClaimSecondCancelAfterAnotherReservation(t *testing.T) {
	srv := server(t)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1},
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	if !s.Allow("k") {
		t.Fatal("first request denied")
	}
	r1, err := s.Reserve("k", 1, 10*time.Hour)
	if err != nil || !r1.OK() {
		t.Fatal(r1, err)
	}
	if !r1.Cancel() {
		t.Fatal("Cancel of the latest reservation gave nothing back")
	}
	r2, err := s.Reserve("k", 1, 10*time.Hour)
	if err != nil || !r2.OK() {
		t.Fatal(r2, err)
	}
	if r1.Cancel() {
		t.Errorf("a second Cancel of r1 gave back r2's tokens (r1 slot %v, r2 slot %v)", r1.At(), r2.At())
	}
}
