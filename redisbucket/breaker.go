package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/isnil"
	"github.com/keyrate/keyrate/internal/wrap"
)

// ErrCircuitOpen reports that the circuit breaker of the call's server is
// open (see WithBreaker): that server failed Breaker.Failures times in a
// row, and the store sends it nothing until the back-off ends. A call
// refused so gets the failure policy's answer at once, with, under
// FailClosed, an error wrapping both ErrUnavailable and ErrCircuitOpen.
// The breaker's opening is passed to the WithOnError callback as an error
// wrapping it and the last failure, naming the server on a client of
// several.
var ErrCircuitOpen = errors.New("redisbucket: circuit breaker open")

// ErrCircuitClosed is passed to the WithOnError callback, wrapped, when
// the circuit breaker closes again: a probe was answered. It is never
// returned by a call.
var ErrCircuitClosed = errors.New("redisbucket: circuit breaker closed")

// Breaker configures WithBreaker. Its zero value is the defaults.
type Breaker struct {
	// Failures is how many calls in a row must fail (each an outage:
	// no answer within the timeout, a connection error, or an error
	// reply) for the breaker to open. The default is DefaultBreakerFailures.
	Failures int
	// Backoff is how long the breaker stays open the first time; each
	// probe that fails doubles it, up to MaxBackoff. The default is
	// DefaultBreakerBackoff.
	Backoff time.Duration
	// MaxBackoff bounds the back-off. The default is
	// DefaultBreakerMaxBackoff, or Backoff if that is longer.
	MaxBackoff time.Duration
	// Clock times the back-off. The default (nil) is clock.System(); a
	// clock.Manual lets a test step through back-offs without sleeping.
	Clock clock.Clock
}

// Defaults and bounds of Breaker.
const (
	// DefaultBreakerFailures is Breaker.Failures's default.
	DefaultBreakerFailures = 5
	// DefaultBreakerBackoff is Breaker.Backoff's default.
	DefaultBreakerBackoff = time.Second
	// DefaultBreakerMaxBackoff is Breaker.MaxBackoff's default.
	DefaultBreakerMaxBackoff = 30 * time.Second
	// MaxBreakerBackoff is the longest Backoff and MaxBackoff accepted.
	MaxBreakerBackoff = time.Hour
)

// WithBreaker gives the store a circuit breaker: after b.Failures calls in
// a row that Redis did not answer, the store stops sending calls for a
// back-off, answering each at once by its failure policy (FailClosed's
// error then wraps ErrCircuitOpen too); when the back-off ends it lets one
// call through as a probe, the others still answered at once. A probe
// that Redis answers closes the breaker; one that fails opens it again
// for twice the back-off, up to b.MaxBackoff. A hung server (one that
// accepts connections but never answers) therefore costs one timeout per
// back-off, instead of one per call.
//
// Each server has a breaker of its own: on a *redis.ClusterClient each
// master (the master of a key's slot, as the client finds it), on a
// *redis.Ring each shard. A master that fails holds back only the calls
// to its own keys; the other masters' keys keep getting Redis's answers.
// A call whose server the client cannot name (a Cluster whose slot map
// it cannot load) goes through a breaker of its own; so does every call
// of any other client, which the store takes for one server.
//
// The breaker applies to the calls that decide, refund, reserve and
// cancel; Len's SCAN is not held back. A call that the deny cache answers
// (WithDenyCache) never reaches it. Stats counts the breaker's openings,
// closings and the calls it answered, summed over the servers, and says
// whether one is open; each opening and closing is passed to the
// WithOnError callback, as an error wrapping ErrCircuitOpen (with
// ErrUnavailable and the last failure) or ErrCircuitClosed.
// Under FallbackLocal, the fallback store answers while it is open, so
// Redis takes over again only after a probe: up to one back-off after it
// recovers.
//
// New returns an error wrapping keyrate.ErrInvalidOption if b.Failures is
// negative, a back-off is negative or above MaxBreakerBackoff, or b.Clock
// is a typed nil. Zero fields take their defaults. The default is no
// breaker: every call tries Redis.
func WithBreaker(b Breaker) keyrate.Option {
	return config.StoreOption("redisbucket.WithBreaker", func(s *settings) error {
		switch {
		case b.Failures < 0:
			return fmt.Errorf("breaker Failures %d is negative", b.Failures)
		case b.Backoff < 0 || b.Backoff > MaxBreakerBackoff:
			return fmt.Errorf("breaker Backoff %v is not from 0 (the default) to %v", b.Backoff, MaxBreakerBackoff)
		case b.MaxBackoff < 0 || b.MaxBackoff > MaxBreakerBackoff:
			return fmt.Errorf("breaker MaxBackoff %v is not from 0 (the default) to %v", b.MaxBackoff, MaxBreakerBackoff)
		case b.Clock != nil && isnil.Is(b.Clock):
			return fmt.Errorf("breaker Clock is a nil %T", b.Clock)
		}
		if b.Failures == 0 {
			b.Failures = DefaultBreakerFailures
		}
		if b.Backoff == 0 {
			b.Backoff = DefaultBreakerBackoff
		}
		if b.MaxBackoff == 0 {
			b.MaxBackoff = max(DefaultBreakerMaxBackoff, b.Backoff)
		}
		b.MaxBackoff = max(b.MaxBackoff, b.Backoff)
		if b.Clock == nil {
			b.Clock = clock.System()
		}
		s.breaker = &b
		return nil
	})
}

// Breaker states.
const (
	stClosed  = iota // calls go to Redis
	stOpen           // calls are refused until the back-off ends
	stProbing        // one call, the probe, is in flight; the others are refused
)

// breakers is a store's circuit breakers (WithBreaker): one per server
// that the client sends a key's calls to, found as the client finds it,
// so that a server that fails holds back only the calls to its keys. On
// a client of one server the hot path is one nil check more than a
// single breaker; on a Cluster or a Ring it is the client's look-up of
// the key's server (a hash and a search of the slot map, which the
// client repeats to send the call) and a sync.Map load.
type breakers struct {
	cfg Breaker
	// node returns the server a Redis key is on, for a client of several
	// (nil: one server), or an error.
	node func(ctx context.Context, key string) (*redis.Client, error)
	// one is the one server's breaker; with node, that of the calls whose
	// server is unknown.
	one    *breaker
	byAddr sync.Map // with node: server address → *breaker
	counts breakerCounts

	mu         sync.Mutex // serialises adding to byAddr
	size, kept int        // breakers in byAddr; those left by the last sweep
}

// minSweep is the fewest breakers byAddr holds before a sweep.
const minSweep = 64

// breakerCounts are Stats' counts, summed over a store's breakers.
type breakerCounts struct {
	opens, closes, refused atomic.Uint64
}

func newBreakers(cfg Breaker, c redis.UniversalClient) *breakers {
	bs := &breakers{cfg: cfg}
	bs.one = &breaker{cfg: cfg, counts: &bs.counts}
	switch c := c.(type) {
	case *redis.ClusterClient:
		bs.node = c.MasterForKey
	case *redis.Ring:
		bs.node = func(_ context.Context, key string) (*redis.Client, error) { return c.GetShardClientForKey(key) }
	}
	return bs
}

// of returns the breaker of the server Redis key key is on. ctx bounds
// the client's look-up (a Cluster's first one loads its slot map).
func (bs *breakers) of(ctx context.Context, key string) *breaker {
	if bs.node == nil {
		return bs.one
	}
	c, err := bs.node(ctx, key)
	if err != nil || c == nil {
		return bs.one
	}
	addr := c.Options().Addr
	if b, ok := bs.byAddr.Load(addr); ok {
		return b.(*breaker)
	}
	return bs.add(addr)
}

// add returns addr's breaker, making it if byAddr has none. Once byAddr
// has doubled since the last sweep, it first drops the breakers that are
// closed with no failure counted, as good as new (a later call makes
// another), so that servers a failover or a reshard took away leave
// nothing behind. A call that holds a dropped breaker still counts its
// outcome there, where the next calls do not see it: at worst a breaker
// opens a few failures late.
func (bs *breakers) add(addr string) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok := bs.byAddr.Load(addr); ok {
		return b.(*breaker)
	}
	if bs.size >= max(2*bs.kept, minSweep) {
		bs.byAddr.Range(func(k, v any) bool {
			if b := v.(*breaker); b.state.Load() == stClosed && b.failures.Load() == 0 {
				bs.byAddr.Delete(k)
				bs.size--
			}
			return true
		})
		bs.kept = bs.size
	}
	b := &breaker{cfg: bs.cfg, addr: addr, counts: &bs.counts}
	bs.byAddr.Store(addr, b)
	bs.size++
	return b
}

// open reports whether any breaker is open or probing.
func (bs *breakers) open() bool {
	open := bs.one.state.Load() != stClosed
	bs.byAddr.Range(func(_, v any) bool {
		open = open || v.(*breaker).state.Load() != stClosed
		return !open
	})
	return open
}

// breaker is one server's state machine. A closed breaker that has seen
// no failure costs a call two atomic loads; every change of state takes
// the mutex.
type breaker struct {
	cfg      Breaker
	addr     string // the server's, on a client of several; "" otherwise
	state    atomic.Int32
	failures atomic.Int32 // consecutive failures while closed

	mu      sync.Mutex
	backoff time.Duration // the current back-off, while open or probing
	until   time.Duration // the reading at which the back-off ends

	counts *breakerCounts // the store's
}

// errRefused is what a call the open breaker refuses fails with, before
// the store wraps it in ErrUnavailable.
var errRefused = fmt.Errorf("%w: no call sent", ErrCircuitOpen)

// enter reports whether a call may go to Redis, and whether it is the
// probe. It returns errRefused if not.
func (b *breaker) enter() (probe bool, err error) {
	if b.state.Load() == stClosed {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case stClosed:
		return false, nil
	case stOpen:
		if b.cfg.Clock.Now() >= b.until {
			b.state.Store(stProbing)
			return true, nil
		}
	}
	b.counts.refused.Add(1)
	return false, errRefused
}

// outcome is how a call that entered ended.
type outcome int

const (
	answered outcome = iota // Redis answered
	failed                  // an outage
	gaveUp                  // the caller's context ended first: no verdict
)

// exit records how a call that entered ended, and returns the error to
// report if the breaker opened or closed (nil otherwise). cause is the
// failure, for failed.
func (b *breaker) exit(probe bool, o outcome, cause error) error {
	switch {
	case o == answered && !probe && b.failures.Load() == 0 && b.state.Load() == stClosed:
		return nil // the common case: nothing to change
	case o == gaveUp && !probe:
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	switch o {
	case answered:
		b.failures.Store(0)
		if probe || b.state.Load() != stClosed {
			b.state.Store(stClosed)
			b.counts.closes.Add(1)
			return fmt.Errorf("%w: Redis answered the probe%s", ErrCircuitClosed, b.at())
		}
	case gaveUp: // the probe's caller gave up: the next call probes
		b.state.Store(stOpen)
		b.until = now
	case failed:
		switch {
		case probe:
			b.backoff = min(2*b.backoff, b.cfg.MaxBackoff)
		case b.state.Load() == stClosed && int(b.failures.Add(1)) >= b.cfg.Failures:
			b.backoff = b.cfg.Backoff
		default:
			return nil
		}
		b.failures.Store(0)
		b.state.Store(stOpen)
		b.until = now + b.backoff
		b.counts.opens.Add(1)
		return wrap.Errorf("%w: for %v after %s%s: %w: %w", ErrCircuitOpen, b.backoff, what(probe, b.cfg.Failures), b.at(), ErrUnavailable, cause)
	}
	return nil
}

// at names b's server, on a client of several.
func (b *breaker) at() string {
	if b.addr == "" {
		return ""
	}
	return " at " + b.addr
}

// what names what opened the breaker.
func what(probe bool, failures int) string {
	if probe {
		return "a failed probe"
	}
	return fmt.Sprintf("%d failures in a row", failures)
}
