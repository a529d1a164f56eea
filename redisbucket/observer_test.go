package redisbucket_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestObserver: against a real server, every AllowN, AllowTier and
// Reserve is one event; a policy the store lacks is one with its error.
func TestObserver(t *testing.T) {
	srv := server(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	var log conformance.Recorder
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(2)}}
	s := mustNew(t, c, keyrate.PerMinute(1), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(pro), keyrate.WithObserver(&log))
	tier, err := s.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	s.Allow("a")
	s.AllowN("a", 1)
	s.AllowTier("b", tier, 2)
	s.Reserve("c", 1, 0)
	s.AllowN("c", 0)
	def := keyrate.DefaultPolicy
	conformance.SameEvents(t, "real server", log.Take(), []keyrate.Event{
		{Key: "a", Policy: def, Cost: 1, Allowed: true},
		{Key: "a", Policy: def, Cost: 1},
		{Key: "b", Policy: "pro", Cost: 2, Allowed: true},
		{Key: "c", Policy: def, Cost: 1, Allowed: true},
		{Key: "c", Policy: def, Cost: 0, Err: keyrate.ErrInvalidCost},
	})
}

// TestObserverDegraded: with Redis unreachable, the failure policy's
// answers are events marked Degraded: FailOpen's allowed with no error,
// FailClosed's denied with ErrUnavailable.
func TestObserverDegraded(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	def := keyrate.DefaultPolicy
	allowed := keyrate.Event{Key: "k", Policy: def, Cost: 1, Allowed: true, Degraded: true}
	denied := keyrate.Event{Key: "k", Policy: def, Cost: 1, Degraded: true}
	closed := keyrate.Event{Key: "k", Policy: def, Cost: 1, Degraded: true, Err: redisbucket.ErrUnavailable}
	for _, tc := range []struct {
		policy redisbucket.FailurePolicy
		want   []keyrate.Event // AllowN's, then Reserve's
	}{
		{redisbucket.FailOpen, []keyrate.Event{allowed, allowed}},
		{redisbucket.FailClosed, []keyrate.Event{closed, closed}},
		// The fallback store enforces 1 a minute: the reservation finds
		// it spent.
		{redisbucket.FallbackLocal, []keyrate.Event{allowed, denied}},
	} {
		var log conformance.Recorder
		s := mustNew(t, c, keyrate.PerMinute(1), redisbucket.WithTimeout(time.Second),
			redisbucket.WithFailurePolicy(tc.policy), keyrate.WithObserver(&log))
		s.AllowN("k", 1)
		s.Reserve("k", 1, 0)
		conformance.SameEvents(t, tc.policy.String(), log.Take(), tc.want)
	}
}

// TestObserverWait: Wait and WaitTier are one event each, a Wait whose
// context is done before the call included (with the context's error), as
// in the in-process stores.
func TestObserverWait(t *testing.T) {
	srv := server(t)
	var log conformance.Recorder
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerHour(2)}}
	s := mustNew(t, newClient(t, srv.Addr()), keyrate.PerHour(1), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(pro), keyrate.WithObserver(&log))
	tier, err := s.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(context.Background(), "e", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := s.WaitTier(ctx, "e", tier, 3); err == nil {
		t.Fatal("WaitTier with a cost above the burst: no error")
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := s.Wait(done, "f", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
	if err := s.WaitTier(done, "f", tier, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTier with a cancelled context = %v, want context.Canceled", err)
	}
	def := keyrate.DefaultPolicy
	conformance.SameEvents(t, "Wait", log.Take(), []keyrate.Event{
		{Key: "e", Policy: def, Cost: 1, Allowed: true},
		{Key: "e", Policy: "pro", Cost: 3, Err: keyrate.ErrCostExceedsBurst},
		{Key: "f", Policy: def, Cost: 1, Err: context.Canceled},
		{Key: "f", Policy: "pro", Cost: 1, Err: context.Canceled},
	})
}
