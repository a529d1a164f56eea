package redisbucket

import (
	"fmt"
	"strings"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Defaults of the store's options.
const (
	// DefaultPrefix is the key prefix when WithPrefix is not given.
	DefaultPrefix = "keyrate:"
	// DefaultTimeout bounds each call when WithTimeout is not given.
	DefaultTimeout = 50 * time.Millisecond
	// MaxTimeout is the longest timeout WithTimeout accepts.
	MaxTimeout = time.Minute
	// MaxPrefixLen is the longest prefix WithPrefix accepts, in bytes.
	MaxPrefixLen = 256
)

// settings is the Redis store's own configuration, filled in by the options
// below through config.StoreOption.
type settings struct {
	prefix     string
	hashTag    bool
	timeout    time.Duration
	policy     FailurePolicy
	fallback   *keyrate.Limit // nil: the store's limit
	onError    func(error)
	timeSource clock.Clock // nil: the server's TIME
	// evictionAllowed skips New's check of maxmemory-policy.
	evictionAllowed bool
	denyCache       int         // keys of WithDenyCache; 0: none
	breaker         *Breaker    // WithBreaker's, defaults filled in; nil: none
	fallbackNodes   int         // WithFallbackNodes's n; 0: 1
	nodeCount       *NodeCount  // WithNodeCount's, defaults filled in; nil: none
	lease           *Lease      // WithLeases's; nil: none
	pipelining      *Pipelining // WithPipelining's, defaults filled in; nil: none
}

func defaults() settings {
	return settings{prefix: DefaultPrefix, timeout: DefaultTimeout}
}

// WithPrefix sets the prefix of every Redis key the store uses: the key for
// user key k is prefix+k (or prefix+"{"+k+"}" with WithHashTag). Stores that
// share a prefix share buckets, and must use the same policies. The prefix may
// be empty; it is at most MaxPrefixLen bytes. The default is DefaultPrefix.
func WithPrefix(prefix string) keyrate.Option {
	return config.StoreOption("redisbucket.WithPrefix", func(s *settings) error {
		if len(prefix) > MaxPrefixLen {
			return fmt.Errorf("prefix of %d bytes is longer than %d", len(prefix), MaxPrefixLen)
		}
		s.prefix = prefix
		return nil
	})
}

// WithHashTag wraps the user key in a Redis Cluster hash tag, prefix+"{"+k+"}",
// so that the bucket lands in the same slot as the application's other keys
// tagged {k}. (The tag ends at the first "}" after the "{", so for a key
// holding "}" the slot is that of the key's part before it.) The prefix must
// then hold no "{", or its own tag would decide the slot. The default is no
// tag: the slot is that of the whole key. The store works on Cluster either
// way, since each call touches one key.
func WithHashTag() keyrate.Option {
	return config.StoreOption("redisbucket.WithHashTag", func(s *settings) error {
		s.hashTag = true
		return nil
	})
}

// WithTimeout bounds every call, from the first byte sent to the last one
// read, retries included, to d, from 1µs to MaxTimeout. A call that runs out
// of time gets the failure policy's answer. The default is DefaultTimeout.
// (A call whose context is never cancelled, as with Allow and AllowN, waits
// for a free connection of the pool, or between retries, up to the smaller
// of d/8 and 1ms past d: its context's Done channel is shared with the
// calls whose deadlines fall that close, which saves four allocations a
// call. Reading a reply is bounded by d exactly.)
//
// The bound holds only if the client honours context deadlines, so New
// requires a client built with ContextTimeoutEnabled: true.
func WithTimeout(d time.Duration) keyrate.Option {
	return config.StoreOption("redisbucket.WithTimeout", func(s *settings) error {
		if d < time.Microsecond || d > MaxTimeout {
			return fmt.Errorf("timeout %v is not from 1µs to %v", d, MaxTimeout)
		}
		s.timeout = d
		return nil
	})
}

// WithFailurePolicy sets what a call answers when Redis does not: see
// FailurePolicy. The default is FailClosed.
func WithFailurePolicy(p FailurePolicy) keyrate.Option {
	return config.StoreOption("redisbucket.WithFailurePolicy", func(s *settings) error {
		if p < FailClosed || p > FallbackLocal {
			return fmt.Errorf("failure policy %d is not FailClosed, FailOpen or FallbackLocal", int(p))
		}
		s.policy = p
		return nil
	})
}

// WithFallbackLimit sets the limit of the in-process store that answers
// while Redis is unreachable under FallbackLocal. The fallback store is per
// process, so a fleet of N processes admits up to N times its limit during
// an outage: a limit divided by N keeps the fleet's total, as
// WithFallbackNodes(N) does for every policy. New returns an
// error wrapping keyrate.ErrInvalidLimit if l is invalid, and one wrapping
// keyrate.ErrInvalidOption if the policy is not FallbackLocal. The default
// is the store's own limit.
//
// It replaces the fallback's default policy only (and SetPolicy of the
// default leaves it alone): the fallback enforces the store's named
// policies (keyrate.WithPolicies) as they are.
func WithFallbackLimit(l keyrate.Limit) keyrate.Option {
	return config.StoreOption("redisbucket.WithFallbackLimit", func(s *settings) error {
		s.fallback = &l
		return nil
	})
}

// WithOnError sets a function called with every error a Redis round trip
// returns (wrapping ErrUnavailable), and with an error wrapping
// ErrMalformedBucket, naming the Redis key, for every call that found a
// malformed value at its bucket's key. It is called from the calling
// goroutine, before the call returns: keep it fast. New calls it too,
// before it returns, if it could not check the server's maxmemory-policy
// (an error wrapping ErrPolicyUnchecked: see New), so f must not use the
// Store that New is still building. A nil f is no callback, the default.
// Stats counts the calls' errors either way.
func WithOnError(f func(error)) keyrate.Option {
	return config.StoreOption("redisbucket.WithOnError", func(s *settings) error {
		s.onError = f
		return nil
	})
}

// WithTimeSource makes the script use c's reading, truncated to a whole µs
// and sent with each call, instead of the server's TIME: for tests and
// replay, never for a fleet, whose members must share one clock. Readings
// below 0 count as 0. Keys still expire by the server's clock, which c
// need not keep pace with, so under a time source a key lives at least an
// hour of the server's time after its last spend, however soon its bucket
// is full. A nil c is the default, the server's TIME; a typed nil (such as
// a nil *clock.Manual) makes New fail with keyrate.ErrInvalidOption.
//
// (keyrate.WithClock does not apply to this store: New rejects it, since
// the clock is the server's.)
func WithTimeSource(c clock.Clock) keyrate.Option {
	return config.StoreOption("redisbucket.WithTimeSource", func(s *settings) error {
		if c != nil && isnil.Is(c) {
			return fmt.Errorf("a nil %T", c)
		}
		s.timeSource = c
		return nil
	})
}

// check validates the settings as a whole, once every option has applied.
func (s *settings) check() error {
	if s.hashTag && strings.ContainsAny(s.prefix, "{}") {
		return fmt.Errorf("%w: redisbucket.WithHashTag: prefix %q holds a brace, whose tag would decide the slot",
			keyrate.ErrInvalidOption, s.prefix)
	}
	if s.nodeCount != nil && s.policy != FallbackLocal {
		return fmt.Errorf("%w: redisbucket.WithNodeCount: the failure policy is %v, not FallbackLocal",
			keyrate.ErrInvalidOption, s.policy)
	}
	if s.fallbackNodes != 0 && s.policy != FallbackLocal {
		return fmt.Errorf("%w: redisbucket.WithFallbackNodes: the failure policy is %v, not FallbackLocal",
			keyrate.ErrInvalidOption, s.policy)
	}
	if s.fallback != nil && s.policy != FallbackLocal {
		return fmt.Errorf("%w: redisbucket.WithFallbackLimit: the failure policy is %v, not FallbackLocal",
			keyrate.ErrInvalidOption, s.policy)
	}
	return nil
}
