package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Store is a keyrate.Limiter whose buckets live in Redis, shared by every
// process that uses the same server (or Cluster), prefix and limit.
//
// Each call is one round trip: an EVALSHA of one Lua script (EVAL when the
// server lacks it) on the one key of the bucket, which reads the server's
// TIME and applies the generic cell rate algorithm on the bucket's
// theoretical arrival time, as keyrate.Rule does in process, in integer
// ticks of 1/k µs (see gcraScript). The script runs atomically on the
// server, so concurrent calls from any number of processes never admit more
// than the limit; the one clock is the server's, so the processes' clocks
// do not matter. A key is deleted by Redis when its bucket is full again.
// For the same schedule of calls, a Store makes the same decisions as the
// in-process stores, field for field (Remaining, RetryAfter, ResetAfter),
// as long as the schedule's times are whole µs.
//
// Every call is bounded by the store's timeout (WithTimeout, default
// DefaultTimeout); when Redis fails to answer in time the store's
// FailurePolicy answers instead (WithFailurePolicy, default FailClosed),
// and the failure is counted in Stats.
//
// The limit holds only while Redis keeps every bucket until it is full
// again: New refuses a server whose maxmemory-policy may evict keys (see
// ErrEvictingPolicy and WithEvictionAllowed).
//
// A Store is safe for concurrent use; its concurrency is the client's
// connection pool. Create one with New; the zero value is not usable. The
// Store does not own the client: close the client when done with both.
type Store struct {
	client   redis.UniversalClient
	units    units
	policy   keyrate.Rule // for CheckCost
	set      settings
	fallback *atomicbucket.Store // nil unless the policy is FallbackLocal
	// fallbackBurst is the fallback limit's Burst.
	fallbackBurst int

	// policyErr is PolicyCheck's answer: nil, or why New could not check
	// the servers' maxmemory-policy.
	policyErr error

	calls, errs, degraded, malformed atomic.Uint64
}

var _ keyrate.Limiter = (*Store)(nil)

// New returns a store enforcing limit on every key, in client's Redis.
//
// client must honour context deadlines (redis.Options.ContextTimeoutEnabled,
// or the ClusterOptions and RingOptions field of that name), or the timeout
// could not bound a slow server's reply: New checks it for *redis.Client,
// *redis.ClusterClient and *redis.Ring. The server must be Redis 5 or later
// (the script reads TIME before writing, which needs effects replication).
//
// New returns an error wrapping keyrate.ErrInvalidLimit if limit is out of
// range for keyrate (limit.Validate) or for the script: a token interval
// below 1µs, or a fill time beyond 2^52 ticks of 1/k µs (142 years at k =
// 1). It returns an error wrapping keyrate.ErrInvalidOption for a nil
// client (nil itself, or a nil pointer of any client type, such as
// (*redis.Client)(nil)), one without context deadlines, an option that
// does not apply (keyrate.WithClock among them: use WithTimeSource for
// tests; and keyrate.WithMaxKeys, WithSweepInterval and WithHashedKeys,
// since Redis expires a key when its bucket is full), or an option value
// out of range. Those checks send nothing to Redis.
//
// Then, unless WithEvictionAllowed is given, New sends one CONFIG GET
// maxmemory-policy to every server behind client (each node of a Cluster,
// each shard of a Ring), all within the store's timeout, and returns an
// error wrapping ErrEvictingPolicy, naming the server and its policy, if
// any answers a policy other than noeviction: see ErrEvictingPolicy for
// why. If a server cannot answer (CONFIG renamed away or denied by an ACL,
// as on many managed services; the server unreachable, or too slow, at
// start) New still returns the store, since an outage is the failure
// policy's to answer: PolicyCheck then returns an error wrapping
// ErrPolicyUnchecked that says why, and New passes that error to the
// WithOnError callback, if any, before it returns. The check is not a call
// Stats counts.
func New(client redis.UniversalClient, limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	set := defaults()
	common, err := keyrate.Configure(&set, opts...)
	if err != nil {
		return nil, err
	}
	if common.Clock != clock.System() {
		return nil, fmt.Errorf("%w: keyrate.WithClock does not apply to redisbucket, whose clock is the server's TIME: use redisbucket.WithTimeSource for tests and replay",
			keyrate.ErrInvalidOption)
	}
	switch {
	case common.MaxKeys != 0:
		return nil, fmt.Errorf("%w: keyrate.WithMaxKeys does not apply to redisbucket: bound the server's memory with maxmemory", keyrate.ErrInvalidOption)
	case common.SweepInterval != 0:
		return nil, fmt.Errorf("%w: keyrate.WithSweepInterval does not apply to redisbucket: a full bucket's key expires by itself", keyrate.ErrInvalidOption)
	case common.HashedKeys:
		return nil, fmt.Errorf("%w: keyrate.WithHashedKeys does not apply to redisbucket", keyrate.ErrInvalidOption)
	}
	if err := set.check(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("%w: redisbucket.New: nil client", keyrate.ErrInvalidOption)
	}
	if isnil.Is(client) {
		return nil, fmt.Errorf("%w: redisbucket.New: nil client (%T)", keyrate.ErrInvalidOption, client)
	}
	if known, enabled := contextTimeouts(client); known && !enabled {
		return nil, fmt.Errorf("%w: redisbucket.New: the client's ContextTimeoutEnabled is false, so no timeout could bound a call: set it in the client's options",
			keyrate.ErrInvalidOption)
	}
	u, err := compileUnits(limit)
	if err != nil {
		return nil, err
	}
	pol, err := keyrate.NewRule(limit, nil)
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, units: u, policy: pol, set: set}
	if set.policy == FallbackLocal {
		fl := limit
		if set.fallback != nil {
			fl = *set.fallback
		}
		var local []keyrate.Option
		if set.timeSource != nil {
			local = append(local, keyrate.WithClock(set.timeSource))
		}
		if s.fallback, err = atomicbucket.New(fl, local...); err != nil {
			return nil, fmt.Errorf("redisbucket.WithFallbackLimit: %w", err)
		}
		s.fallbackBurst = fl.Burst
	}
	s.policyErr = errSkipped
	if !set.evictionAllowed {
		s.policyErr = checkPolicy(client, set.timeout)
		if errors.Is(s.policyErr, ErrEvictingPolicy) {
			return nil, s.policyErr
		}
		if s.policyErr != nil && set.onError != nil {
			set.onError(s.policyErr)
		}
	}
	return s, nil
}

// contextTimeouts reports whether client's type is one whose options New
// can read, and if so whether it honours context deadlines.
func contextTimeouts(client redis.UniversalClient) (known, enabled bool) {
	switch c := client.(type) {
	case *redis.Client:
		return true, c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return true, c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return true, c.Options().ContextTimeoutEnabled
	}
	return false, false
}

// Limit returns the limit the store enforces.
func (s *Store) Limit() keyrate.Limit { return s.units.limit }

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false for an invalid
// key, and the failure policy's answer when Redis does not answer.
func (s *Store) Allow(key string) bool {
	d, _ := s.AllowNContext(context.Background(), key, 1)
	return d.Allowed
}

// AllowN is AllowNContext with context.Background(): still bounded by the
// store's timeout.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	return s.AllowNContext(context.Background(), key, cost)
}

// AllowNContext spends cost tokens for key if its bucket holds that many,
// and reports the decision, in one round trip to Redis bounded by ctx and
// the store's timeout.
//
// It returns an error wrapping keyrate.ErrInvalidCost for cost < 1,
// keyrate.ErrCostExceedsBurst for cost > Burst and keyrate.ErrInvalidKey
// for an empty key or one over MaxKeyLen bytes, sending nothing. If ctx is
// done before Redis answers, it returns a zero Decision and an error
// wrapping ctx.Err(): the caller gave up, which is not an outage. If Redis
// fails to answer within the timeout, the Decision is the failure policy's
// (see FailurePolicy), with an error wrapping ErrUnavailable under
// FailClosed and no error under FailOpen and FallbackLocal.
func (s *Store) AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error) {
	if err := s.policy.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	if err := checkKey(key); err != nil {
		return keyrate.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", err)
	}
	d, allowed, err := s.eval(ctx, key, cost)
	if err == nil {
		return s.units.decide(d, cost, allowed), nil
	}
	if ctx.Err() != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return keyrate.Decision{Allowed: true, Limit: s.units.limit}, nil
	case FallbackLocal:
		if cost > s.fallbackBurst {
			// The fallback can never allow it: deny as FailClosed does,
			// without the error, as the policy promises.
			return s.closed(cost), nil
		}
		return s.fallback.AllowN(key, cost)
	}
	return s.closed(cost), err
}

// closed is FailClosed's answer: denied, and retry once cost tokens could
// have accrued.
func (s *Store) closed(cost int) keyrate.Decision {
	return keyrate.Decision{
		Limit:      s.units.limit,
		RetryAfter: s.units.nanos(debt{}, int64(cost)*s.units.interval),
	}
}

// Peek is PeekContext with context.Background(), returning only the
// Decision: for an invalid key, a denied Decision with only Limit set.
func (s *Store) Peek(key string) keyrate.Decision {
	d, err := s.PeekContext(context.Background(), key)
	if err != nil && d == (keyrate.Decision{}) {
		d.Limit = s.units.limit
	}
	return d
}

// PeekContext reports what a cost-1 request for key would get now,
// spending nothing and storing nothing, in one round trip bounded by ctx
// and the store's timeout. Its errors, and its answer when Redis fails, are
// those of AllowNContext for a cost of 1, except that FallbackLocal peeks
// at the fallback store.
func (s *Store) PeekContext(ctx context.Context, key string) (keyrate.Decision, error) {
	if err := checkKey(key); err != nil {
		return keyrate.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", err)
	}
	d, _, err := s.eval(ctx, key, 0)
	if err == nil {
		return s.units.peek(d), nil
	}
	if ctx.Err() != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return keyrate.Decision{Allowed: true, Limit: s.units.limit}, nil
	case FallbackLocal:
		return s.fallback.Peek(key), nil
	}
	return s.closed(1), err
}

// eval runs the script for key, spending cost tokens (0: peek), and returns
// the bucket's debt after the call and whether the spend was allowed. Its
// error wraps ErrUnavailable and has been counted and reported, unless
// parent is done.
func (s *Store) eval(parent context.Context, key string, cost int) (debt, bool, error) {
	s.calls.Add(1)
	ctx, cancel := context.WithTimeout(parent, s.set.timeout)
	defer cancel()
	now, minTTL := "-1", "0" // the server's TIME
	if ts := s.set.timeSource; ts != nil {
		now, minTTL = strconv.FormatInt(micros(ts.Now()), 10), timeSourceTTLArg
	}
	rkey := s.redisKey(key)
	res, err := gcraScript.Run(ctx, s.client, []string{rkey},
		now, cost, s.units.argK, s.units.argI, s.units.argF, minTTL).Int64Slice()
	if err == nil {
		err = s.units.checkReply(res)
	}
	if err != nil {
		if parent.Err() != nil {
			return debt{}, false, err // the caller gave up: not an outage
		}
		return debt{}, false, s.fail(err)
	}
	if res[3] == 1 {
		s.malformed.Add(1)
		if f := s.set.onError; f != nil {
			what := "answered as an empty bucket and replaced with one"
			if cost == 0 {
				what = "answered as an empty bucket (Peek writes nothing)"
			}
			f(fmt.Errorf("%w at key %q: %s", ErrMalformedBucket, rkey, what))
		}
	}
	return debt{micros: res[1], ticks: res[2]}, res[0] == 1, nil
}

// fail counts a failed round trip, reports it to the callback, and returns
// it wrapped in ErrUnavailable.
func (s *Store) fail(err error) error {
	s.errs.Add(1)
	err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	if f := s.set.onError; f != nil {
		f(err)
	}
	return err
}

// timeSourceTTLArg is timeSourceTTL in ms, as the script's argument.
var timeSourceTTLArg = strconv.FormatInt(timeSourceTTL.Milliseconds(), 10)

// micros converts a time source's reading to the script's whole µs,
// truncating, and clamped to [0, maxMicros].
func micros(t time.Duration) int64 {
	return min(max(int64(t/time.Microsecond), 0), maxMicros)
}

// scanCount is the COUNT hint of each SCAN page in Len.
const scanCount = 1000

// Len returns the number of keys under the store's prefix, or 0 if Redis
// does not answer (see LenContext for the error). It is LenContext with
// context.Background().
func (s *Store) Len() int {
	n, _ := s.LenContext(context.Background())
	return n
}

// LenContext returns the number of Redis keys under the store's prefix:
// this store's buckets that are not yet full again, plus those of any other
// store whose prefix begins with this one's. It walks the keyspace with
// SCAN MATCH, on every master of a Cluster or shard of a Ring: O(all keys
// in the database), one round trip per page of about 1000 keys, each page
// bounded by the store's timeout, so it is for tests and diagnostics, not
// for a request path. An error wraps ErrUnavailable or ctx.Err().
func (s *Store) LenContext(ctx context.Context) (int, error) {
	var total atomic.Int64
	scan := func(ctx context.Context, c redis.Cmdable) error {
		n, err := s.scan(ctx, c)
		total.Add(n)
		return err
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	default:
		err = scan(ctx, s.client)
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("redisbucket: %w", ctx.Err())
		}
		return 0, err
	}
	return int(total.Load()), nil
}

// scan counts the keys under the prefix on one server, one page per round
// trip. Its error wraps ErrUnavailable and has been counted.
func (s *Store) scan(ctx context.Context, c redis.Cmdable) (int64, error) {
	pattern := scanPattern(s.set.prefix)
	var n int64
	var cursor uint64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		s.calls.Add(1)
		page, next, err := s.scanPage(ctx, c, cursor, pattern)
		if err != nil {
			if ctx.Err() != nil {
				return n, err // the caller gave up: not an outage
			}
			return n, s.fail(err)
		}
		n += int64(len(page))
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

func (s *Store) scanPage(ctx context.Context, c redis.Cmdable, cursor uint64, pattern string) ([]string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.timeout)
	defer cancel()
	return c.Scan(ctx, cursor, pattern, scanCount).Result()
}

// Stats returns the store's counts of Redis calls and failures so far.
func (s *Store) Stats() Stats {
	return Stats{Calls: s.calls.Load(), Errors: s.errs.Load(), Degraded: s.degraded.Load(), Malformed: s.malformed.Load()}
}
