package redisbucket_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/striped"
)

// unreachable is an address nothing listens on: the tests here fail before
// any byte is sent, so they need no server.
const unreachable = "127.0.0.1:1"

// wrappedClient is a client type of the application's own, as a
// redis.UniversalClient that New cannot look inside.
type wrappedClient struct{ redis.UniversalClient }

func TestNewErrors(t *testing.T) {
	good := newClient(t, unreachable)
	noDeadlines := redis.NewClient(&redis.Options{Addr: unreachable})
	t.Cleanup(func() { _ = noDeadlines.Close() })
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
		limit  keyrate.Limit
		opts   []keyrate.Option
		want   error
		msg    string // a part of the message that names the value or bound
	}{
		{"zero limit", good, keyrate.Limit{}, nil, keyrate.ErrInvalidLimit, "Rate 0 is below 1"},
		{"negative burst", good, keyrate.PerSecond(1).WithBurst(-5), nil, keyrate.ErrInvalidLimit, "Burst -5 is below 1"},
		{"too fast for keyrate", good, keyrate.Limit{Rate: 999_999_937, Per: time.Second, Burst: 1}, nil, keyrate.ErrInvalidLimit, "too fast"},
		{"interval below 1µs", good, keyrate.Limit{Rate: 1, Per: 999 * time.Nanosecond, Burst: 1}, nil, keyrate.ErrInvalidLimit, "a token every 999ns is below 1µs"},
		{"2M per second", good, keyrate.PerSecond(2_000_000), nil, keyrate.ErrInvalidLimit, "a token every 500ns is below 1µs"},
		{"fill beyond 2^52µs", good, keyrate.Every(24 * time.Hour).WithBurst(53_000), nil, keyrate.ErrInvalidLimit, "Burst 53000 takes too long to fill at 1 per 24h0m0s for redisbucket: the most is 52124"},
		{"sliding log above redisbucket.MaxLogRate", good, keyrate.Limit{Rate: redisbucket.MaxLogRate + 1, Per: time.Second}.Using(keyrate.SlidingLog), nil, keyrate.ErrInvalidLimit, "Rate 1025 is above the most of 1024 a sliding-log limit can count in redisbucket"},
		{"sliding log of a fraction of a µs", good, keyrate.Limit{Rate: 10, Per: 1500 * time.Nanosecond}.Using(keyrate.SlidingLog), nil, keyrate.ErrInvalidLimit, "sliding-log window of 1.5µs: redisbucket needs a whole number of µs"},
		{"FallbackLocal under a log", good, keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingLog), []keyrate.Option{redisbucket.WithFailurePolicy(redisbucket.FallbackLocal)},
			keyrate.ErrUnsupportedAlgorithm, "atomicbucket cannot carry policy \"default\"'s sliding-log window"},
		{"sliding log beside another window", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithPolicies(keyrate.Policy{Name: "l", Limits: []keyrate.Limit{
			keyrate.Limit{Rate: 10, Per: time.Second}.Using(keyrate.SlidingLog), keyrate.PerMinute(100)}})}, keyrate.ErrInvalidPolicy, "sliding-log"},
		{"window of a fraction of a µs", good, keyrate.Limit{Rate: 10, Per: 1500 * time.Nanosecond}.Using(keyrate.FixedWindow), nil, keyrate.ErrInvalidLimit, "fixed-window window of 1.5µs: redisbucket needs a whole number of µs"},
		{"sliding window of too many", good, keyrate.Limit{Rate: 2_000_000, Per: 24 * time.Hour}.Using(keyrate.SlidingWindow), nil, keyrate.ErrInvalidLimit, "Rate times the window in µs must be at most 2^53, here at most 104249"},
		{"windows without a common multiple", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithPolicies(keyrate.Policy{Name: "w", Limits: []keyrate.Limit{
			keyrate.Limit{Rate: 1, Per: 1000003 * time.Microsecond}.Using(keyrate.FixedWindow), keyrate.Limit{Rate: 1, Per: 999983 * time.Microsecond}.Using(keyrate.FixedWindow), keyrate.Limit{Rate: 1, Per: 1000033 * time.Microsecond}.Using(keyrate.FixedWindow)}})}, keyrate.ErrInvalidPolicy, "no common multiple within 8760h0m0s"},
		{"nil client", nil, keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "nil client"},
		{"nil *redis.Client", (*redis.Client)(nil), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "nil client (*redis.Client)"},
		{"nil *redis.ClusterClient", (*redis.ClusterClient)(nil), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "nil client (*redis.ClusterClient)"},
		{"nil *redis.Ring", (*redis.Ring)(nil), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "nil client (*redis.Ring)"},
		{"nil wrapper", (*wrappedClient)(nil), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "nil client (*redisbucket_test.wrappedClient)"},
		{"zero redis.Client", new(redis.Client), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "a zero *redis.Client"},
		{"zero redis.ClusterClient", new(redis.ClusterClient), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "a zero *redis.ClusterClient"},
		{"zero redis.Ring", new(redis.Ring), keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "a zero *redis.Ring"},
		{"client without deadlines", noDeadlines, keyrate.PerSecond(1), nil, keyrate.ErrInvalidOption, "ContextTimeoutEnabled is false"},
		{"WithClock", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithClock(clock.NewManual(0))}, keyrate.ErrInvalidOption, "WithClock does not apply"},
		{"WithMaxKeys", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithMaxKeys(10)}, keyrate.ErrInvalidOption, "WithMaxKeys does not apply"},
		{"WithSweepInterval", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithSweepInterval(time.Second)}, keyrate.ErrInvalidOption, "WithSweepInterval does not apply"},
		{"WithHashedKeys", good, keyrate.PerSecond(1), []keyrate.Option{keyrate.WithHashedKeys()}, keyrate.ErrInvalidOption, "WithHashedKeys does not apply"},
		{"another store's option", good, keyrate.PerSecond(1), []keyrate.Option{striped.WithStripes(4)}, keyrate.ErrInvalidOption, "striped.WithStripes does not apply"},
		{"nil time source", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithTimeSource((*clock.Manual)(nil))}, keyrate.ErrInvalidOption, "WithTimeSource: a nil *clock.Manual"},
		{"zero timeout", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithTimeout(0)}, keyrate.ErrInvalidOption, "timeout 0s is not from 1µs to 1m0s"},
		{"long timeout", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithTimeout(time.Hour)}, keyrate.ErrInvalidOption, "timeout 1h0m0s is not from 1µs to 1m0s"},
		{"long prefix", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithPrefix(strings.Repeat("p", 257))}, keyrate.ErrInvalidOption, "prefix of 257 bytes is longer than 256"},
		{"unknown policy", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithFailurePolicy(7)}, keyrate.ErrInvalidOption, "failure policy 7"},
		{"tag under a tagged prefix", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithPrefix("{app}:"), redisbucket.WithHashTag()}, keyrate.ErrInvalidOption, `prefix "{app}:" holds a brace`},
		{"fallback limit without FallbackLocal", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithFallbackLimit(keyrate.PerSecond(1))}, keyrate.ErrInvalidOption, "the failure policy is FailClosed, not FallbackLocal"},
		{"invalid fallback limit", good, keyrate.PerSecond(1), []keyrate.Option{redisbucket.WithFailurePolicy(redisbucket.FallbackLocal), redisbucket.WithFallbackLimit(keyrate.Limit{Rate: 1, Per: time.Second})}, keyrate.ErrInvalidLimit, "Burst 0 is below 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := redisbucket.New(c.client, c.limit, c.opts...)
			if s != nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("New = %v, %v; want nil and an error wrapping %v that says %q", s, err, c.want, c.msg)
			}
		})
	}
}

func TestCallErrors(t *testing.T) {
	s := mustNew(t, newClient(t, unreachable), keyrate.PerSecond(5))
	long := strings.Repeat("k", redisbucket.MaxKeyLen+1)
	for _, c := range []struct {
		key  string
		cost int
		want error
		msg  string
	}{
		{"", 1, keyrate.ErrInvalidKey, "the empty key"},
		{long, 1, keyrate.ErrInvalidKey, "key of 513 bytes is longer than 512"},
		{"k", 0, keyrate.ErrInvalidCost, "cost 0 is below 1"},
		{"k", -3, keyrate.ErrInvalidCost, "cost -3 is below 1"},
		{"k", 6, keyrate.ErrCostExceedsBurst, "cost 6 is above the burst of 5"},
		{"", 0, keyrate.ErrInvalidCost, "cost 0 is below 1"}, // the cost is checked first
	} {
		d, err := s.AllowN(c.key, c.cost)
		if d != (keyrate.Decision{}) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("AllowN(%.8q, %d) = %+v, %v; want a zero Decision and an error wrapping %v that says %q", c.key, c.cost, d, err, c.want, c.msg)
		}
	}
	for _, key := range []string{"", long} {
		if s.Allow(key) {
			t.Errorf("Allow(%.8q) = true for an invalid key", key)
		}
		if d := s.Peek(key); d != (keyrate.Decision{Policy: keyrate.DefaultPolicy, Limit: keyrate.PerSecond(5)}) {
			t.Errorf("Peek(%.8q) = %+v, want a denied Decision with only Policy and Limit", key, d)
		}
		if _, err := s.PeekContext(t.Context(), key); !errors.Is(err, keyrate.ErrInvalidKey) {
			t.Errorf("PeekContext(%.8q) error = %v, want ErrInvalidKey", key, err)
		}
	}
	if st := s.Stats(); st != (redisbucket.Stats{}) {
		t.Errorf("Stats = %+v after calls rejected for bad input, want zero: nothing may be sent", st)
	}
}
