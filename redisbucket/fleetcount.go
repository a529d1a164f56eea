package redisbucket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/isnil"
)

// NodeCount configures WithNodeCount. Its zero value is the defaults.
type NodeCount struct {
	// Every is how often the store announces itself and counts the
	// fleet. A node not heard from for three times Every is not counted.
	// The default is DefaultNodeCountEvery.
	Every time.Duration
	// Clock times the announcements. The default (nil) is clock.System();
	// a clock.Manual lets a test step them.
	Clock clock.Clock
}

// DefaultNodeCountEvery is NodeCount.Every's default.
const DefaultNodeCountEvery = 10 * time.Second

// WithNodeCount makes a FallbackLocal store count the live processes of
// its fleet through Redis while Redis answers, and divide its fallback's
// limits by that count, as WithFallbackNodes does with a fixed number (the
// larger of the two is used): a goroutine announces the store every
// c.Every in a sorted set of the fleet's members, scored by the server's
// TIME, and counts the members heard from within three times c.Every.
// During an outage the count stays what it was last, which is the point:
// the fleet that shared Redis shares the fallback limits. Stats.FleetNodes
// is the divisor in use.
//
// The set is the Redis key "{keyrate-nodes}" followed by the store's
// prefix, outside the prefix's key space, so that stores of one prefix
// count one fleet. Call Close to stop the goroutine (and leave the set).
// New returns an error wrapping keyrate.ErrInvalidOption for a failure
// policy other than FallbackLocal, c.Every negative or above an hour, or
// a typed nil c.Clock. The default is no count: the fallback divides by
// WithFallbackNodes's n, or 1.
func WithNodeCount(c NodeCount) keyrate.Option {
	return config.StoreOption("redisbucket.WithNodeCount", func(s *settings) error {
		switch {
		case c.Every < 0 || c.Every > time.Hour:
			return fmt.Errorf("node count Every %v is not from 0 (the default) to 1h", c.Every)
		case c.Clock != nil && isnil.Is(c.Clock):
			return fmt.Errorf("node count Clock is a nil %T", c.Clock)
		}
		if c.Every == 0 {
			c.Every = DefaultNodeCountEvery
		}
		if c.Clock == nil {
			c.Clock = clock.System()
		}
		s.nodeCount = &c
		return nil
	})
}

// heartbeatScript adds ARGV[1] to the set KEYS[1] at the server's time in
// ms, drops the members older than ARGV[2] ms, keeps the set that long,
// and returns how many members it holds.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])
`)

// counter is WithNodeCount's goroutine and its state.
type counter struct {
	cfg    NodeCount
	key    string // the fleet's set
	id     string // this store's member
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startCounter starts s's count, announcing the store at once.
func (s *Store) startCounter(c NodeCount) error {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.counter = &counter{cfg: c, key: "{keyrate-nodes}" + s.set.prefix, id: hex.EncodeToString(b[:]), cancel: cancel, done: make(chan struct{})}
	go s.count(ctx)
	return nil
}

// count announces the store every Every until ctx ends, resharing the
// fallback's limits whenever the count changes.
func (s *Store) count(ctx context.Context) {
	c := s.counter
	defer close(c.done)
	for next := c.cfg.Clock.Now(); ; {
		if err := clock.SleepUntil(ctx, c.cfg.Clock, next); err != nil {
			return
		}
		if n, err := s.heartbeat(ctx); err == nil { // else an outage: the count stays
			s.reshare(int(n))
		}
		// The next beat, Every after this one's slot, or now if that has
		// passed (a clock that jumped, a heartbeat that took long): never
		// a burst of beats to catch up.
		next = max(next+c.cfg.Every, c.cfg.Clock.Now())
	}
}

// heartbeat runs the heartbeat script once, within the store's timeout.
func (s *Store) heartbeat(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.timeout)
	defer cancel()
	live := 3 * s.counter.cfg.Every.Milliseconds()
	return heartbeatScript.Run(ctx, s.client, []string{s.counter.key}, s.counter.id, live).Int64()
}

// reshare sets the fallback's divisor to the larger of WithFallbackNodes's
// n and counted, and, if it changed, gives the fallback every policy
// shared by it. A policy whose share is out of range (see share) keeps
// the share it had, and the error goes to the WithOnError callback.
func (s *Store) reshare(counted int) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	n := min(max(s.set.fallbackNodes, counted, 1), MaxFallbackNodes)
	if int(s.fleetNodes.Load()) == n {
		return
	}
	s.fleetNodes.Store(int64(n))
	for _, p := range s.pols.List() {
		if p.Name == keyrate.DefaultPolicy && s.set.fallback != nil {
			p.Limits = []keyrate.Limit{*s.set.fallback}
		}
		sp, err := sharePolicy(p, n)
		if err == nil {
			err = s.fallback.SetPolicy(sp)
		}
		if err != nil && s.set.onError != nil {
			s.set.onError(fmt.Errorf("redisbucket: WithNodeCount counted %d nodes: the fallback keeps its share of %q: %w", n, p.Name, err))
		}
	}
}

// Close stops the goroutine of WithNodeCount, and takes the store out of
// the fleet's count (one call, within the store's timeout). The store
// still answers after Close, with the fallback's limits as they were. It
// is a no-op without WithNodeCount, and after the first call.
func (s *Store) Close() error {
	c := s.counter
	if c == nil {
		return nil
	}
	var err error
	c.once.Do(func() {
		c.cancel()
		<-c.done
		ctx, cancel := context.WithTimeout(context.Background(), s.set.timeout)
		defer cancel()
		err = s.client.ZRem(ctx, c.key, c.id).Err()
	})
	return err
}
