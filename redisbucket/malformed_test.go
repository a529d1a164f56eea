package redisbucket_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestMalformedValue writes, at a bucket key, values no store writes, and
// requires every policy to answer as for an empty bucket at the time of
// the call (never more than the limit, so never FailOpen's pass), to
// replace the value with that empty bucket so that the key heals, and to
// report it in Stats and to the OnError callback, not as an outage.
func TestMalformedValue(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	ctx := t.Context()
	limit := keyrate.PerHour(100) // a token every 36s
	values := []struct {
		name  string
		write func(key string) error
	}{
		{"text", func(k string) error { return client.Set(ctx, k, "not a bucket", 0).Err() }},
		{"no colon", func(k string) error { return client.Set(ctx, k, "3600020000000", 0).Err() }},
		{"negative", func(k string) error { return client.Set(ctx, k, "-5:0", 0).Err() }},
		{"ticks not below K", func(k string) error { return client.Set(ctx, k, "3600020000000:1", 0).Err() }},
		{"trailing garbage", func(k string) error { return client.Set(ctx, k, "3600020000000:0x", 0).Err() }},
		{"empty", func(k string) error { return client.Set(ctx, k, "", 0).Err() }},
		{"beyond 2^53 µs", func(k string) error { return client.Set(ctx, k, "9007199254740993:0", 0).Err() }},
		{"beyond int64", func(k string) error { return client.Set(ctx, k, "99999999999999999999999:0", 0).Err() }},
		{"hash", func(k string) error { return client.HSet(ctx, k, "tat", "1").Err() }},
		{"list", func(k string) error { return client.RPush(ctx, k, "x").Err() }},
	}
	for _, policy := range []redisbucket.FailurePolicy{redisbucket.FailOpen, redisbucket.FailClosed, redisbucket.FallbackLocal} {
		t.Run(policy.String(), func(t *testing.T) {
			for _, v := range values {
				t.Run(v.name, func(t *testing.T) {
					clk := clock.NewManual(start)
					prefix := uniquePrefix(t)
					var mu sync.Mutex
					var reported []error
					s := mustNew(t, client, limit,
						redisbucket.WithFailurePolicy(policy),
						redisbucket.WithTimeSource(clk),
						redisbucket.WithPrefix(prefix),
						redisbucket.WithTimeout(slowTimeout),
						redisbucket.WithOnError(func(err error) {
							if errors.Is(err, redisbucket.ErrPolicyUnchecked) {
								return // New's check, which TestPolicyUnchecked tests
							}
							mu.Lock()
							reported = append(reported, err)
							mu.Unlock()
						}))
					if err := v.write(prefix + "k"); err != nil {
						t.Fatal(err)
					}
					empty := keyrate.Decision{Policy: keyrate.DefaultPolicy, Limit: limit, RetryAfter: 36 * time.Second, ResetAfter: time.Hour, WindowResetAfter: time.Hour}
					// Peek reads it as an empty bucket and writes nothing.
					if d, err := s.PeekContext(ctx, "k"); d != empty || err != nil {
						t.Errorf("PeekContext = %+v, %v; want %+v and no error", d, err, empty)
					}
					if d, err := s.AllowN("k", 1); d != empty || err != nil {
						t.Errorf("AllowN = %+v, %v; want %+v (an empty bucket) and no error", d, err, empty)
					}
					// Healed: a well-formed empty bucket, expiring.
					const healed = "1:36000000:1000:3600000000/3603600000000:0:0" // under limit's descriptor
					if got, err := client.Get(ctx, prefix+"k").Result(); err != nil || got != healed {
						t.Errorf("GET after AllowN = %q, %v; want the empty bucket %s", got, err, healed)
					}
					if ttl, err := client.PTTL(ctx, prefix+"k").Result(); err != nil || ttl <= 0 {
						t.Errorf("PTTL after AllowN = %v, %v; want an expiry", ttl, err)
					}
					if st := s.Stats(); st != (redisbucket.Stats{Calls: 2, Malformed: 2}) {
						t.Errorf("Stats = %+v, want 2 calls that found a malformed value and no errors", st)
					}
					mu.Lock()
					if len(reported) != 2 || !errors.Is(reported[0], redisbucket.ErrMalformedBucket) || errors.Is(reported[0], redisbucket.ErrUnavailable) ||
						!strings.Contains(reported[0].Error(), prefix+"k") {
						t.Errorf("OnError got %v; want two errors wrapping ErrMalformedBucket (not ErrUnavailable) naming the key", reported)
					}
					mu.Unlock()
					// From here on the bucket refills as any other.
					if d, err := s.AllowN("k", 1); d.Allowed || err != nil {
						t.Errorf("AllowN right after = %+v, %v; want denied", d, err)
					}
					clk.Advance(36 * time.Second)
					want := keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, ResetAfter: time.Hour, WindowResetAfter: time.Hour}
					if d, err := s.AllowN("k", 1); d != want || err != nil {
						t.Errorf("AllowN one token later = %+v, %v; want %+v", d, err, want)
					}
					if st := s.Stats(); st.Malformed != 2 || st.Errors != 0 || st.Degraded != 0 {
						t.Errorf("Stats = %+v, want still 2 malformed and no errors", st)
					}
				})
			}
		})
	}
}
