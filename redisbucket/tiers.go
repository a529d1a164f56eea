package redisbucket

import (
	"context"
	"fmt"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/rules"
)

// Tier returns a handle on the policy named name, for AllowTier and
// RefundTier, or an error wrapping keyrate.ErrUnknownPolicy that names it.
// The zero Tier is the default policy. See keyrate.PolicyLimiter.
func (s *Store) Tier(name string) (keyrate.Tier, error) { return s.pols.Tier(name) }

// AllowTier is AllowTierContext with context.Background(): still bounded
// by the store's timeout.
func (s *Store) AllowTier(key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	return s.AllowTierContext(context.Background(), key, tier, cost)
}

// AllowTierContext is AllowNContext under tier's policy (its current
// version) instead of key's: it spends cost tokens from every window of
// key's bucket if every window holds them, and from none otherwise. It
// returns an error wrapping keyrate.ErrUnknownPolicy for a Tier of another
// store, and otherwise the errors of AllowNContext. Under an unlimited
// policy every request is allowed, and nothing is sent to Redis.
func (s *Store) AllowTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	ctx = orBackground(ctx)
	rs, err := s.pols.Rules(tier)
	if err != nil {
		s.pols.ObserveMiss(key, tier, cost, err)
		return keyrate.Decision{}, err
	}
	return s.allow(ctx, key, rs, cost)
}

// PeekTier is PeekTierContext with context.Background(): still bounded
// by the store's timeout.
func (s *Store) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	return s.PeekTierContext(context.Background(), key, tier)
}

// PeekTierContext is PeekContext under tier's policy (its current version)
// instead of key's: what a cost-1 AllowTierContext would get now, spending
// and storing nothing, in one round trip (the script's peek, which writes
// nothing, carries a value of another policy only in its answer). It
// returns an error wrapping keyrate.ErrUnknownPolicy for a Tier of
// another store, and otherwise PeekContext's errors.
func (s *Store) PeekTierContext(ctx context.Context, key string, tier keyrate.Tier) (keyrate.Decision, error) {
	rs, err := s.pols.Rules(tier)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return s.peek(orBackground(ctx), key, rs)
}

// Refund is RefundContext with context.Background(): still bounded by the
// store's timeout.
func (s *Store) Refund(key string, cost int) error {
	return s.RefundContext(context.Background(), key, cost)
}

// RefundContext gives cost tokens back to key under key's policy (as
// AllowNContext chooses it), in one round trip bounded by ctx and the
// store's timeout: every window gains cost tokens, capped at its Burst
// (see keyrate.PolicyLimiter), unless some window owes more than its
// Burst (tokens promised to reservations whose slots have not come, or a
// debt carried over from a larger limit): then no window gains anything,
// as an in-process store decides. A key Redis does not hold is full, and
// gains nothing; nothing is written for it.
//
// It returns an error wrapping keyrate.ErrUnknownPolicy,
// keyrate.ErrInvalidCost for cost < 1, keyrate.ErrCostExceedsBurst for a
// cost above the smallest Burst of the policy's windows, or
// keyrate.ErrInvalidKey, sending nothing; and one wrapping ctx.Err() if
// ctx is done first. If Redis fails to answer, the refund is lost: under
// FailClosed it returns an error wrapping ErrUnavailable; under FailOpen,
// which counted nothing, nil; under FallbackLocal it gives the tokens back
// to the fallback store instead, and returns nil.
func (s *Store) RefundContext(ctx context.Context, key string, cost int) error {
	ctx = orBackground(ctx)
	rs, err := s.pols.ForKey(key)
	if err != nil {
		return err
	}
	return s.refund(ctx, key, rs, cost)
}

// RefundTier is RefundTierContext with context.Background().
func (s *Store) RefundTier(key string, tier keyrate.Tier, cost int) error {
	return s.RefundTierContext(context.Background(), key, tier, cost)
}

// RefundTierContext is RefundContext under tier's policy. It returns an
// error wrapping keyrate.ErrUnknownPolicy for a Tier of another store.
func (s *Store) RefundTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	ctx = orBackground(ctx)
	rs, err := s.pols.Rules(tier)
	if err != nil {
		return err
	}
	return s.refund(ctx, key, rs, cost)
}

// refund is RefundContext under rs.
func (s *Store) refund(ctx context.Context, key string, rs *rules.Rules, cost int) error {
	if err := rs.CheckCost(cost); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if rs.Unlimited() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisbucket: %w", err)
	}
	var st [keyrate.MaxLimits]rules.State
	_, _, err := s.eval(ctx, key, rs, -cost, st[:rs.Len()])
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return nil
	case FallbackLocal:
		if t, err := s.fallback.Tier(rs.Name()); err == nil {
			_ = s.fallback.RefundTier(key, t, cost) // above the fallback's Burst: it could not have spent it
		}
		return nil
	}
	return err
}

// SetPolicy adds p, or replaces the policy of the same name (the default,
// named keyrate.DefaultPolicy, included), while requests are in flight:
// every request this store starts after it returns is decided under p.
// Each key's state is carried over by the script on its next request (see
// keyrate.PolicyLimiter), whichever process made the change: the value
// records the limits it was written under. It changes this store only:
// give every process of a fleet the same policies. It returns an error
// wrapping keyrate.ErrInvalidPolicy, and changes nothing, if p is invalid
// for keyrate or for the script (see New), or if the fallback's share of
// it is out of range (see WithFallbackNodes).
//
// Under FallbackLocal the fallback store gets p too, except a default
// policy when WithFallbackLimit set the fallback's. Under WithLeases, p's
// Bursts are lowered as New lowers them.
func (s *Store) SetPolicy(p keyrate.Policy) error {
	if s.set.lease != nil {
		var err error
		if p, err = leasePolicy(p, s.set.lease.Life); err != nil {
			return err
		}
	}
	if _, err := newPlan(p); err != nil {
		return err
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	fp, toFallback := p, s.fallback != nil && (p.Name != keyrate.DefaultPolicy || s.set.fallback == nil)
	if toFallback {
		var err error
		if fp, err = sharePolicy(p, int(s.fleetNodes.Load())); err != nil {
			return err
		}
	}
	var old *rules.Rules
	if t, err := s.pols.Tier(p.Name); err == nil {
		old, _ = s.pols.Rules(t)
	}
	if err := s.pols.Set(p); err != nil {
		return err
	}
	if old != nil {
		s.plans.Delete(old) // a request still under old compiles it again
	}
	if toFallback {
		return s.fallback.SetPolicy(fp)
	}
	return nil
}

// Policies returns the policies the store enforces now, the default
// included, in no set order.
func (s *Store) Policies() []keyrate.Policy { return s.pols.List() }

// PolicyVersion is plumbing for httplimit (its parameter's type is
// internal: no other package can call it): the count of the store's
// policy changes so far, which tells the middleware that the header
// fields it built from Policies may be stale.
func (s *Store) PolicyVersion(handle.PolicyVersion) uint64 { return s.pols.Version() }
