package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/wrap"
)

// ErrEvictingPolicy reports a Redis server whose maxmemory-policy is not
// noeviction. Every bucket key has a TTL, so every other policy (the
// volatile-* ones as well as allkeys-*) lets Redis delete buckets that are
// not full when memory runs short: a client that fills memory with keys of
// its own makes Redis drop another client's empty bucket, and that client
// starts again from a full one, admitted above its limit for as long as the
// pressure lasts. New returns an error wrapping it, naming the server and
// its policy, unless WithEvictionAllowed is given.
var ErrEvictingPolicy = errors.New("redisbucket: redis may evict buckets")

// ErrPolicyUnchecked reports that New did not learn the server's
// maxmemory-policy: CONFIG GET failed (renamed away or denied by an ACL, as
// on many managed services, or the server was unreachable or too slow:
// then the error also wraps ErrUnavailable), or WithEvictionAllowed skipped
// the check. Store.PolicyCheck returns it, and New passes it to the
// WithOnError callback.
var ErrPolicyUnchecked = errors.New("redisbucket: maxmemory-policy not checked")

// WithEvictionAllowed makes New accept a server whose maxmemory-policy may
// evict bucket keys, at the risk ErrEvictingPolicy describes: New does not
// check the policy at all, and sends nothing to Redis. Give it only when
// the server cannot run out of memory for the buckets (no maxmemory, and
// none set later), or when a key admitted above its limit while Redis
// evicts is acceptable. The default is to check, and refuse such a server.
func WithEvictionAllowed() keyrate.Option {
	return config.StoreOption("redisbucket.WithEvictionAllowed", func(s *settings) error {
		s.evictionAllowed = true
		return nil
	})
}

// PolicyCheck returns nil if New read the maxmemory-policy of every server
// behind the client (every node of a Cluster, every shard of a Ring) and
// each was noeviction. Otherwise it returns the error wrapping
// ErrPolicyUnchecked that says why New could not, as New passed it to the
// WithOnError callback. New checks once: a store built while Redis was
// unreachable stays unchecked (build another to check again).
func (s *Store) PolicyCheck() error { return s.policyErr }

// errSkipped is PolicyCheck's answer under WithEvictionAllowed.
var errSkipped = fmt.Errorf("%w: redisbucket.WithEvictionAllowed skipped the check", ErrPolicyUnchecked)

// checkPolicy reads maxmemory-policy from every server behind client,
// within timeout. It returns an error wrapping ErrEvictingPolicy if any
// server may evict keys, else one wrapping ErrPolicyUnchecked if some
// server's policy could not be read, else nil.
func checkPolicy(client redis.UniversalClient, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var (
		mu                  sync.Mutex
		evicting, unchecked []string
		cause               error // the first server's error
		seen                []string
	)
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		p, err := readPolicy(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, addr)
		switch {
		case err != nil:
			unchecked = append(unchecked, fmt.Sprintf("%s: %v", addr, err))
			if cause == nil {
				cause = err
			}
		case p != "noeviction":
			evicting = append(evicting, fmt.Sprintf("%s has maxmemory-policy %s", addr, p))
		}
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n, n.Options().Addr) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n, n.Options().Addr) })
		// ForEachShard skips the shards it holds to be down.
		for _, addr := range c.Options().Addrs {
			if !slices.Contains(seen, addr) {
				unchecked = append(unchecked, addr+": the shard is down")
			}
		}
	case *redis.Client:
		err = check(ctx, c, c.Options().Addr)
	default:
		err = check(ctx, c, "the server")
	}
	if err != nil { // the Cluster's state could not be loaded
		unchecked = append(unchecked, err.Error())
		if cause == nil {
			cause = err
		}
	}
	if len(evicting) > 0 {
		slices.Sort(evicting)
		return fmt.Errorf("%w: %s, which may evict bucket keys (each has a TTL) and so admit a key above its limit: set maxmemory-policy noeviction, or accept the risk with redisbucket.WithEvictionAllowed",
			ErrEvictingPolicy, strings.Join(evicting, "; "))
	}
	if len(unchecked) > 0 {
		slices.Sort(unchecked)
		msg := strings.Join(unchecked, "; ")
		var reply redis.Error
		if !errors.As(cause, &reply) { // no answer: an outage, not a refusal
			return wrap.Errorf("%w: %w: %s", ErrPolicyUnchecked, ErrUnavailable, msg)
		}
		return fmt.Errorf("%w: %s", ErrPolicyUnchecked, msg)
	}
	return nil
}

// readPolicy returns one server's maxmemory-policy.
func readPolicy(ctx context.Context, c redis.Cmdable) (string, error) {
	m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", err
	}
	p, ok := m["maxmemory-policy"]
	if !ok {
		return "", errors.New("CONFIG GET maxmemory-policy returned no value")
	}
	return p, nil
}
