package redisbucket_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

func init() {
	// The fault tests make go-redis log every failed dial; the tests check
	// the failures themselves.
	redis.SetLogger(quiet{})
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// newClient returns a client for addr that honours context deadlines, as
// New requires, closed when t ends.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniquePrefix returns a random key prefix, so that stores on one server
// never share buckets unless a test means them to.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "test-" + hex.EncodeToString(b[:]) + ":"
}

// mustNew builds a store or fails t.
func mustNew(t testing.TB, c redis.UniversalClient, limit keyrate.Limit, opts ...keyrate.Option) *redisbucket.Store {
	t.Helper()
	s, err := redisbucket.New(c, limit, opts...)
	if err != nil {
		t.Fatalf("New(%v): %v", limit, err)
	}
	return s
}

// slowTimeout is the call timeout of tests that are not about timeouts:
// long enough that a loaded CI machine never hits it.
const slowTimeout = 5 * time.Second

// heldFor bounds how long a call may wait for another call that a hook
// holds in flight: far past the calls' own bound (their store's timeout),
// so that a call that returns by its own bound never fails the test
// however loaded the machine is, and one that waits for the held call
// (released only after heldFor) always does.
const heldFor = 8 * time.Second

// server starts a redis-server for t (or skips t without one).
func server(t testing.TB) *redistest.Server {
	t.Helper()
	return redistest.Start(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Shutdown() // the shared cluster, if a test started it
	os.Exit(code)
}

// backend is a Redis deployment the cross-deployment tests run on.
type backend struct {
	name string
	// client returns a new client of the deployment for t, closed when t
	// ends: each call is another process's connection pool.
	client func(t testing.TB) redis.UniversalClient
}

// backends returns one redis-server of t's own, the test binary's shared
// Redis Cluster of three masters (redistest.SharedCluster), reached
// through redis.NewClusterClient, and a redis.Ring of two redis-servers
// of t's own (started when the first of its clients is made).
func backends(t *testing.T) []backend {
	t.Helper()
	srv := server(t)
	var (
		once   sync.Once
		shards map[string]string
	)
	return []backend{
		{"server", func(t testing.TB) redis.UniversalClient { return newClient(t, srv.Addr()) }},
		{"cluster", func(t testing.TB) redis.UniversalClient { return newClusterClient(t, redistest.SharedCluster(t)) }},
		{"ring", func(rt testing.TB) redis.UniversalClient {
			once.Do(func() { shards = map[string]string{"a": server(t).Addr(), "b": server(t).Addr()} })
			return newRingClient(rt, shards)
		}},
	}
}

// newRingClient returns a redis.Ring of the shards (name to address) that
// honours context deadlines, closed when t ends.
func newRingClient(t testing.TB, shards map[string]string) *redis.Ring {
	t.Helper()
	r := redis.NewRing(&redis.RingOptions{Addrs: shards, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// newClusterClient returns a client of c that honours context deadlines,
// closed when t ends.
func newClusterClient(t testing.TB, c *redistest.Cluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
