package redisbucket_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestMultiKey runs keyrate.AllowAll's checks (internal/conformance's
// multikey.go) on a real server and on a Redis Cluster of three masters,
// through keyrate.AllowAll, the two-step (each key its own script call,
// so its keys may lie on any masters), and through Store.AllowAll, one
// script call: on the server for any keys, on the Cluster for keys whose
// prefix holds one hash tag.
func TestMultiKey(t *testing.T) {
	oneScript := func(pl keyrate.PolicyLimiter, ks []keyrate.KeyCost) (keyrate.MultiDecision, error) {
		return pl.(*redisbucket.Store).AllowAll(ks)
	}
	t.Run("two-step/server", func(t *testing.T) { conformance.RunMultiKey(t, conformance.MultiKey{Open: openCarry}) })
	t.Run("two-step/cluster", func(t *testing.T) {
		conformance.RunMultiKey(t, conformance.MultiKey{Open: openClusterCarry("")})
	})
	t.Run("one-script/server", func(t *testing.T) {
		m := conformance.MultiKey{Open: openCarry, AllowAll: oneScript, Atomic: true}
		conformance.RunMultiKey(t, m)
		t.Run("RetryLongest", func(t *testing.T) { conformance.MultiKeyRetryLongest(t, m) })
	})
	t.Run("one-script/cluster", func(t *testing.T) {
		m := conformance.MultiKey{Open: openClusterCarry("{tenant}:"), AllowAll: oneScript, Atomic: true}
		conformance.RunMultiKey(t, m)
		t.Run("RetryLongest", func(t *testing.T) { conformance.MultiKeyRetryLongest(t, m) })
	})
}

// openClusterCarry returns conformance.OpenCarry on the test binary's
// shared Redis Cluster, its keys' prefix ending in tag.
func openClusterCarry(tag string) conformance.OpenCarry {
	return func(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
		clk := clock.NewManual(unixStart)
		s, err := redisbucket.New(newClusterClient(t, redistest.SharedCluster(t)), def, keyrate.WithPolicies(policies...),
			redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)+tag), redisbucket.WithTimeout(slowTimeout))
		if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			return nil, clk
		}
		if err != nil {
			t.Fatal(err)
		}
		return s, clk
	}
}

// TestMultiKeyModel runs conformance.MultiKeyModel on a real server and
// on the Cluster, through both paths: its seeds and 40 sequences of a
// fixed pseudo-random source, every answer and every key's tokens after
// it checked against an independent model.
func TestMultiKeyModel(t *testing.T) {
	seqs := append([][]byte(nil), conformance.MultiKeySeeds...)
	r := rand.New(rand.NewPCG(28, 3))
	for range 40 {
		b := make([]byte, 20+r.IntN(60))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		seqs = append(seqs, b)
	}
	oneScript := func(pl keyrate.PolicyLimiter, ks []keyrate.KeyCost) (keyrate.MultiDecision, error) {
		return pl.(*redisbucket.Store).AllowAll(ks)
	}
	for _, c := range []struct {
		name string
		m    conformance.MultiKey
	}{
		{"two-step/server", conformance.MultiKey{Open: openCarry}},
		{"one-script/server", conformance.MultiKey{Open: openCarry, AllowAll: oneScript, Atomic: true}},
		{"one-script/cluster", conformance.MultiKey{Open: openClusterCarry("{tenant}:"), AllowAll: oneScript, Atomic: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, ops := range seqs {
				t.Run(fmt.Sprint(i), func(t *testing.T) { conformance.MultiKeyModel(t, c.m, ops) })
			}
		})
	}
}

// TestAllowAllOneCall checks that Store.AllowAll is one round trip for
// keys that share a slot (any keys on a single server; keys of one hash
// tag on a Cluster), and the two-step otherwise; and that a denied
// request leaves every key it spent before the denier exactly as it was,
// value and TTL: keys with a value, and a key with none
// (still none).
func TestAllowAllOneCall(t *testing.T) {
	org := keyrate.Policy{Name: "org", Limits: []keyrate.Limit{keyrate.PerMinute(10)}}
	user := keyrate.Policy{Name: "user", Limits: []keyrate.Limit{keyrate.PerMinute(1)}}
	cluster := newClusterClient(t, redistest.SharedCluster(t))
	srv := server(t)
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
		prefix string
		calls  uint64 // per AllowAll of three keys
	}{
		{"server", newClient(t, srv.Addr()), uniquePrefix(t), 1},
		{"cluster-tagged", cluster, uniquePrefix(t) + "{tenant}:", 1},
		{"cluster-untagged", cluster, uniquePrefix(t), 5}, // a spend per key, a check of all but the last
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, c.client, keyrate.PerHour(100), keyrate.WithPolicies(org, user),
				redisbucket.WithPrefix(c.prefix), redisbucket.WithTimeSource(clock.NewManual(unixStart)), redisbucket.WithTimeout(slowTimeout))
			orgT, _ := s.Tier("org")
			userT, _ := s.Tier("user")
			ks := []keyrate.KeyCost{{Key: "org:acme", Tier: orgT, Cost: 1}, {Key: "org:team", Tier: orgT, Cost: 1}, {Key: "user:alice", Tier: userT, Cost: 1}}
			before := s.Stats().Calls
			if d, err := s.AllowAll(ks); err != nil || !d.Allowed || d.Index != 2 {
				t.Fatalf("AllowAll = %+v, %v; want allowed, the user nearest to denying", d, err)
			}
			if n := s.Stats().Calls - before; n != c.calls {
				t.Fatalf("AllowAll of three keys made %d calls, want %d", n, c.calls)
			}
			if c.calls != 1 {
				return
			}
			// org:acme and org:team hold values, org:new none; the user
			// denies.
			ctx := t.Context()
			ks = append([]keyrate.KeyCost{{Key: "org:new", Tier: orgT, Cost: 1}}, ks...)
			type snap struct {
				dump string
				ttl  time.Duration
			}
			snapshot := func() []snap {
				var out []snap
				for _, k := range ks {
					rk := c.prefix + k.Key
					d, err := c.client.Dump(ctx, rk).Result()
					if err != nil && err != redis.Nil {
						t.Fatal(err)
					}
					ttl, err := c.client.PTTL(ctx, rk).Result()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, snap{d, ttl})
				}
				return out
			}
			was := snapshot()
			d, err := s.AllowAll(ks)
			if err != nil || d.Allowed || d.Index != 3 || d.Policy != "user" {
				t.Fatalf("AllowAll with the user spent = %+v, %v; want denied by key 3", d, err)
			}
			for i, now := range snapshot() {
				// The TTL runs on between the snapshots, by the test's
				// own time.
				if now.dump != was[i].dump || now.ttl > was[i].ttl || now.ttl < was[i].ttl-time.Second {
					t.Fatalf("a denied request changed key %d (%s): value %q, TTL %v before; %q, %v after", i, ks[i].Key, was[i].dump, was[i].ttl, now.dump, now.ttl)
				}
			}
			if was[0].dump != "" || was[1].dump == "" || was[1].ttl <= 0 {
				t.Fatalf("the keys before: %+v; want org:new without a value, org:acme with one and a TTL", was)
			}
		})
	}
}
