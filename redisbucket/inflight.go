package redisbucket

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
)

// Bounds of InflightStore's lease.
const (
	// MinInflightLease is the shortest lease Store.Inflight accepts.
	MinInflightLease = time.Millisecond
	// MaxInflightLease is the longest lease Store.Inflight accepts.
	MaxInflightLease = 24 * time.Hour
)

// InflightStore is a fleet-wide concurrency limit (an inflight.Limiter):
// at most Limit() slots held per key at once, across every process that
// uses the same Redis and prefix. Make one with Store.Inflight; it shares
// the Store's client, timeout, circuit breaker, failure policy, error
// callback, time source, hash tag and Stats. An acquire is one script call
// and a release one ZREM (the package documentation's "Requests in flight"
// has the layout).
//
// The lease bounds over-holding: a holder that dies without releasing
// frees its slot when its lease ends. It also bounds what a slot
// guarantees: a request that runs longer than the lease stops counting
// then. Set the lease above your longest request (a server's write
// timeout, a handler's deadline).
//
// When Redis does not answer, the Store's FailurePolicy answers: under
// FailClosed no slot and an error wrapping ErrUnavailable, under FailOpen
// a slot that holds nothing, under FallbackLocal a slot of an in-process
// inflight.Store of the same limit, per process. An acquire whose reply
// is lost after Redis may have run its script (its context ended, or the
// call timed out) removes the holder the script may have added, with one
// more ZREM bounded by the Store's timeout, so that no slot stays held by
// no one until its lease ends. That is best effort: a script that Redis
// runs after the ZREM (a server so slow that the call timed out before it
// ran) still holds its slot until its lease ends.
type InflightStore struct {
	s        *Store
	prefix   string
	n        int
	open     int // the slots an acquire that is not critical may fill
	lease    time.Duration
	leaseArg string // lease in µs
	ttlArg   string // the key's least TTL in ms
	fallback *inflight.Store
	// idBase and seq make each holder's ID: idBase's random bytes, then
	// seq's count.
	idBase string
	seq    atomic.Uint64
}

var _ inflight.Limiter = (*InflightStore)(nil)

// inflightScript is InflightStore's acquire. KEYS[1] is the key's sorted
// set; ARGV is now in µs ("-1": the server's TIME), the limit, the lease
// in µs, the holder's ID and the key's least TTL in ms. It returns 1 if
// it added the holder, 0 if the key was at its limit.
var inflightScript = redis.NewScript(`
local now
if ARGV[1] == '-1' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
local lease = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], string.format('%d', now + lease), ARGV[4])
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(math.ceil(lease / 1000), tonumber(ARGV[5]))))
return 1
`)

// Inflight returns a fleet-wide concurrency limit of n slots per key, each
// held for at most lease unless released sooner, with opts
// (inflight.WithReserved keeps slots for acquires whose context is marked
// by inflight.Critical), in the Store's Redis,
// under the key prefix prefix (the Redis key of user key k is prefix+k,
// or prefix+"{"+k+"}" with WithHashTag). The prefix must not begin with
// the Store's prefix, nor the Store's with it, so that the Store's Len
// never counts the limit's keys; processes that share a prefix share the
// limit, and must give it the same n and lease.
//
// It returns an error wrapping keyrate.ErrInvalidLimit if n is not in [1,
// inflight.MaxLimit], an option's error for an invalid option (as
// inflight.New does), and one wrapping keyrate.ErrInvalidOption if lease
// is not in [MinInflightLease, MaxInflightLease] or the prefix is empty,
// longer than MaxPrefixLen, overlaps the Store's, or holds a brace under
// WithHashTag. It sends nothing to Redis.
func (s *Store) Inflight(prefix string, n int, lease time.Duration, opts ...inflight.Option) (*InflightStore, error) {
	// The in-process limit of the same n and options: it checks them, and
	// is FallbackLocal's fallback.
	local, err := inflight.New(n, opts...)
	if err != nil {
		return nil, fmt.Errorf("redisbucket.Store.Inflight: %w", err)
	}
	switch {
	case lease < MinInflightLease || lease > MaxInflightLease:
		return nil, fmt.Errorf("%w: redisbucket.Store.Inflight: lease %v is not in [%v, %v]", keyrate.ErrInvalidOption, lease, MinInflightLease, MaxInflightLease)
	case prefix == "" || len(prefix) > MaxPrefixLen:
		return nil, fmt.Errorf("%w: redisbucket.Store.Inflight: prefix of %d bytes is not 1 to %d", keyrate.ErrInvalidOption, len(prefix), MaxPrefixLen)
	case strings.HasPrefix(prefix, s.set.prefix) || strings.HasPrefix(s.set.prefix, prefix):
		return nil, fmt.Errorf("%w: redisbucket.Store.Inflight: prefix %q overlaps the store's %q: its Len would count the limit's keys", keyrate.ErrInvalidOption, prefix, s.set.prefix)
	case s.set.hashTag && strings.ContainsAny(prefix, "{}"):
		return nil, fmt.Errorf("%w: redisbucket.Store.Inflight: prefix %q holds a brace, whose tag would decide the slot", keyrate.ErrInvalidOption, prefix)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	l := &InflightStore{s: s, prefix: prefix, n: n, open: n - local.Reserved(), lease: lease,
		leaseArg: strconv.FormatInt(lease.Microseconds(), 10), ttlArg: "0",
		idBase: strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36) + "-"}
	if s.set.timeSource != nil {
		l.ttlArg = timeSourceTTLArg
	}
	if s.set.policy == FallbackLocal {
		l.fallback = local
	}
	return l, nil
}

// Limit returns the most slots a key may hold at once.
func (l *InflightStore) Limit() int { return l.n }

// Lease returns how long a slot is held at most, unless released sooner.
func (l *InflightStore) Lease() time.Duration { return l.lease }

// redisKey returns the Redis key of user key key.
func (l *InflightStore) redisKey(key string) string {
	if l.s.set.hashTag {
		return l.prefix + "{" + key + "}"
	}
	return l.prefix + key
}

// TryAcquire is TryAcquireContext with context.Background().
func (l *InflightStore) TryAcquire(key string) (inflight.Slot, error) {
	return l.TryAcquireContext(context.Background(), key)
}

// TryAcquireContext takes a slot of key if fewer than Limit() are held
// fleet-wide (fewer than Limit() minus the reserve, unless ctx is marked
// by inflight.Critical), in one round trip bounded by ctx and the Store's timeout. A
// Slot whose Acquired is false means the key is at its limit. An empty key
// or one over MaxKeyLen bytes gets an error wrapping keyrate.ErrInvalidKey
// and sends nothing; a failure of Redis gets the failure policy's answer
// (see InflightStore), and a ctx already done an error wrapping its own.
func (l *InflightStore) TryAcquireContext(ctx context.Context, key string) (inflight.Slot, error) {
	if err := checkKey(key); err != nil {
		return inflight.Slot{}, err
	}
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return inflight.Slot{}, fmt.Errorf("redisbucket: %w", err)
	}
	rkey := l.redisKey(key)
	id := l.idBase + strconv.FormatUint(l.seq.Add(1), 36)
	var now any = "-1"
	if ts := l.s.set.timeSource; ts != nil {
		now = micros(ts.Now())
	}
	limit := l.open
	if limit != l.n && inflight.IsCritical(ctx) {
		limit = l.n
	}
	var (
		got  int64
		sent bool
	)
	err := l.s.roundTrip(ctx, rkey, func(rctx context.Context) (err error) {
		sent = true
		got, err = inflightScript.Run(rctx, l.s.client, []string{rkey}, now, limit, l.leaseArg, id, l.ttlArg).Int64()
		return err
	})
	if err != nil && sent && replyLost(ctx, err) {
		l.forget(ctx, rkey, id)
	}
	if err == nil {
		if got == 0 {
			return inflight.Slot{}, nil
		}
		return inflight.NewSlot(&inflightHolder{l: l, rkey: rkey, id: id}, 0), nil
	}
	if ctx.Err() != nil {
		return inflight.Slot{}, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	err = l.s.fail(err)
	l.s.degraded.Add(1)
	switch l.s.set.policy {
	case FailOpen:
		return inflight.NewSlot(noRelease{}, 0), nil
	case FallbackLocal:
		return l.fallback.TryAcquireContext(ctx, key)
	}
	return inflight.Slot{}, err
}

// replyLost reports whether err, a failed acquire's under ctx, may have
// come after Redis ran the script: the caller gave up, or the call timed
// out, while the reply was awaited. The script may then have added the
// holder, which no Slot will release.
func replyLost(ctx context.Context, err error) bool {
	var ne net.Error
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// forget removes the holder id that an acquire whose reply was lost may
// have added to rkey, so that it does not hold a slot for no one until
// its lease ends: one ZREM (of an ID no other acquire uses, so it removes
// nothing else), bounded by the Store's timeout but not by ctx, which may
// be done. It goes past the breaker and reports nothing: the acquire's
// own failure was counted and reported, and if the ZREM fails too the
// lease still frees the slot.
func (l *InflightStore) forget(ctx context.Context, rkey, id string) {
	rctx, cancel := l.s.deadlines.with(context.WithoutCancel(ctx))
	defer cancel()
	_ = l.s.client.ZRem(rctx, rkey, id).Err()
}

// inflightHolder is a slot held in Redis: ZREM of its ID releases it.
type inflightHolder struct {
	l    *InflightStore
	rkey string
	id   string
}

// ReleaseSlot removes the holder, in one round trip bounded by the
// Store's timeout. A failure goes to the WithOnError callback.
func (h *inflightHolder) ReleaseSlot(uint64) {
	s := h.l.s
	err := s.roundTrip(context.Background(), h.rkey, func(ctx context.Context) error {
		return s.client.ZRem(ctx, h.rkey, h.id).Err()
	})
	if err != nil {
		s.fail(err)
	}
}

// noRelease is the Releaser of FailOpen's slots, which hold nothing.
type noRelease struct{}

func (noRelease) ReleaseSlot(uint64) {}
