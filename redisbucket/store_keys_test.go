package redisbucket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// start is the manual clock's reading in these tests, as in the
// conformance suite.
const start = 1000 * time.Hour

// TestIndependentKeys is the conformance suite's test of the same name
// without the empty key, which redisbucket rejects, and with binary and
// maximal keys.
func TestIndependentKeys(t *testing.T) {
	srv := server(t)
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(2),
		redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	keys := []string{"a", "b", "a\x00", "日本", "\xff\xfe", "*", strings.Repeat("k", redisbucket.MaxKeyLen)}
	for _, k := range keys {
		for i := 0; i < 2; i++ {
			if !s.Allow(k) {
				t.Fatalf("key %.8q: request %d denied", k, i)
			}
		}
		if s.Allow(k) {
			t.Fatalf("key %.8q: third request allowed", k)
		}
	}
	if n := s.Len(); n != len(keys) {
		t.Fatalf("Len = %d, want %d", n, len(keys))
	}
}

// TestRedisKeys checks the stored key names and values, the expiry at the
// fill time, and that Len counts only its own prefix, glob characters
// included.
func TestRedisKeys(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := t.Context()
	clk := clock.NewManual(start)
	open := func(opts ...keyrate.Option) *redisbucket.Store {
		t.Helper()
		opts = append([]keyrate.Option{redisbucket.WithTimeSource(clk), redisbucket.WithTimeout(slowTimeout)}, opts...)
		return mustNew(t, client, keyrate.PerMinute(3), opts...)
	}
	plain := open(redisbucket.WithPrefix("a*[?]\\:"))
	tagged := open(redisbucket.WithPrefix("a*"), redisbucket.WithHashTag())
	other := open(redisbucket.WithPrefix("b:"))

	if !plain.Allow("user\x001") || !tagged.Allow("user\x001") || !other.Allow("x") || !other.Allow("y") {
		t.Fatal("a first request was denied")
	}
	// 1000h is 3.6e12 µs; one token of PerMinute(3) is 20s, 20e6 µs
	// (its descriptor: 1 tick a µs, 20e6 ticks a token, 1000 of
	// rules.Rule's ticks a tick, 60e6 ticks to fill).
	const desc = "1:20000000:1000:60000000/"
	for key, want := range map[string]string{
		"a*[?]\\:user\x001": desc + "3600020000000:0:0",
		"a*{user\x001}":     desc + "3600020000000:0:0",
		"b:x":               desc + "3600020000000:0:0",
	} {
		got, err := client.Get(ctx, key).Result()
		if err != nil || got != want {
			t.Errorf("GET %q = %q, %v; want %q", key, got, err, want)
		}
		ttl, err := client.PTTL(ctx, key).Result()
		if err != nil || ttl > time.Hour || ttl < 59*time.Minute {
			t.Errorf("PTTL %q = %v, %v; want the hour a key lives at least under a time source, less the test's run so far", key, ttl, err)
		}
	}
	for _, c := range []struct {
		s    *redisbucket.Store
		want int
	}{{plain, 1}, {tagged, 2}, {other, 2}} {
		// "a*" is a prefix of "a*[?]\:", so tagged counts plain's key too.
		if n, err := c.s.LenContext(ctx); n != c.want || err != nil {
			t.Errorf("LenContext = %d, %v; want %d", n, err, c.want)
		}
	}

	// With the server's TIME, a key expires when its bucket is full, at the
	// next whole ms: 20s after one token of PerMinute(3), 20.001s after
	// one of Every(20.0005s). The script's TIME is between the two read
	// around the call.
	for _, c := range []struct {
		limit keyrate.Limit
		ttlMS int64
	}{{keyrate.PerMinute(3), 20_000}, {keyrate.Every(20*time.Second + 500*time.Microsecond), 20_001}} {
		s := mustNew(t, client, c.limit, redisbucket.WithPrefix("c:"), redisbucket.WithTimeout(slowTimeout))
		before := serverMS(t, client)
		s.Allow(c.limit.String())
		after := serverMS(t, client)
		at, err := client.Do(ctx, "PEXPIRETIME", "c:"+c.limit.String()).Int64()
		if err != nil || at-c.ttlMS < before || at-c.ttlMS > after {
			t.Errorf("%v: PEXPIRETIME = %d, %v; want %d ms after a time in [%d, %d]", c.limit, at, err, c.ttlMS, before, after)
		}
	}

	// A value another program wrote is an empty bucket, replaced by one
	// (TestMalformedValue tests it under each policy).
	client.Set(ctx, "b:bad", "not a bucket", time.Minute)
	if d, err := other.AllowN("bad", 1); err != nil || d.Allowed || other.Stats().Malformed != 1 {
		t.Errorf(`AllowN("bad") = %+v, %v, Stats %+v; want a denial, no error and one malformed value`, d, err, other.Stats())
	}
	if got, err := client.Get(ctx, "b:bad").Result(); err != nil || got != desc+"3600060000000:0:0" {
		t.Errorf(`GET "b:bad" = %q, %v; want the empty bucket %q`, got, err, desc+"3600060000000:0:0")
	}
}

// serverMS returns the server's TIME in whole ms.
func serverMS(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}
