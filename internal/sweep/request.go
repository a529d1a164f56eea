package sweep

import (
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
)

// This file is the request side of a pointer store (mutexbucket): its
// configuration, and the slow path of its requests (a new key, a bucket
// not spent from yet or swept under the caller, hashed keys). A store's
// fast path, a known string key whose bucket is live and spent from, stays
// in the store, calling its own bucket type directly: a method of Map[B]
// calls B's methods through the generic dictionary, which is slower and
// cannot be inlined.

// Init configures a store enforcing limit and the policies in opts: it
// compiles them into *pols, and sets m up, with fresh building a new
// bucket under a policy in states s (Fresh if s is nil). It starts the
// background sweeper if opts ask for one. It returns an error wrapping
// keyrate.ErrInvalidLimit, keyrate.ErrInvalidPolicy or
// keyrate.ErrInvalidOption if limit, a policy or an option is out of
// range, and then starts nothing.
func (m *Map[B]) Init(pols **rules.Policies, limit keyrate.Limit, opts []keyrate.Option, fresh func(rs *rules.Rules, s []rules.State) B) error {
	set, err := config.Configure(nil, opts...)
	if err != nil {
		return err
	}
	ps, err := rules.NewPolicies(limit, set)
	if err != nil {
		return err
	}
	*pols = ps
	m.init(ps, set, fresh)
	return nil
}

// Take spends cost tokens for key under rs if every window of its bucket
// holds them (or, with a wait above 0, reserves them: see
// Bucket.SpendRare), inserting a bucket for a new key and carrying the bucket of a
// key under another policy over to rs (Replace). It writes the states
// after the call into s (one per window of rs) and returns the reading it
// was decided at and rules.Rules.Take's result, or an error wrapping
// keyrate.ErrStoreFull for a new key that the cap leaves no room for. cost
// must satisfy rs.CheckCost, and rs must not be unlimited.
func (m *Map[B]) Take(key string, rs *rules.Rules, cost int, wait time.Duration) (States, time.Duration, int, error) {
	for {
		b, err := m.Get(key, rs)
		if err != nil {
			return States{}, 0, 0, err
		}
		// Read after the lookup: a bucket that replaced a swept one is
		// then spent at a reading no older than the sweep's. (A new
		// bucket is read as the floor, which a sweep of another key may
		// raise after this reading: Floor.Start rereads the clock then.)
		t := m.pols.Now()
		if b.Rules() != rs {
			m.Replace(key, b, rs, t)
			continue
		}
		if s, at, denied, swept := b.SpendRare(t, cost, wait, &m.floor); !swept {
			return s, at, denied, nil
		}
		m.Drop(key, b) // swept under us: look the key up again
	}
}

// Allow is keyrate.Limiter's Allow by way of Take, under rs: a store's
// Allow after its fast path missed.
func (m *Map[B]) Allow(key string, rs *rules.Rules) bool {
	if rs.Unlimited() {
		return true
	}
	_, _, denied, err := m.Take(key, rs, 1, 0)
	return err == nil && denied < 0
}

// AllowN is keyrate.Limiter's AllowN by way of Take, under rs, for a cost
// that satisfies rs.CheckCost: a store's AllowN after its fast path
// missed.
func (m *Map[B]) AllowN(key string, rs *rules.Rules, cost int) (keyrate.Decision, error) {
	if rs.Unlimited() {
		return rs.UnlimitedDecision(), nil
	}
	s, at, denied, err := m.Take(key, rs, cost, 0)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return rs.Decide(s[:rs.Len()], at, cost, denied), nil
}

// Reserve is keyrate.WaitLimiter's Reserve by way of Take, under rs, a
// policy with windows, for a cost that satisfies rs.CheckCost: a pointer
// store's Reserver.ReserveRare. lim is the store's Reserver, for the
// Reservation's Cancel.
func (m *Map[B]) Reserve(lim rules.Canceler, key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	s, at, denied, err := m.Take(key, rs, cost, max(wait, 0))
	if err != nil {
		return keyrate.Reservation{}, err
	}
	return rs.Reserved(lim, key, s[:rs.Len()], at, cost, wait, denied), nil
}

// Denied is rules.Rules.Take's result for a one-window spend that
// reports ok: -1 if allowed, else window 0.
func Denied(ok bool) int {
	if ok {
		return -1
	}
	return 0
}

// Cancel is keyrate.WaitLimiter's Cancel: it gives back r's tokens if the
// map still holds r's key under r's policy and the bucket allows it (see
// Bucket.Cancel).
func (m *Map[B]) Cancel(r keyrate.Reservation) bool {
	return rules.CancelOnce(r, func(rs *rules.Rules) bool {
		b, ok := m.Load(r.Key())
		return ok && b.Rules() == rs && b.Cancel(rules.ReservationEnd(r), r.At(), r.Cost())
	})
}

// Refund gives cost tokens back to key under rs (see
// keyrate.PolicyLimiter), carrying a bucket under another policy over to
// rs first. A key the map does not hold is full, and gains nothing. cost
// must satisfy rs.CheckCost.
func (m *Map[B]) Refund(key string, rs *rules.Rules, cost int) {
	if rs.Unlimited() {
		return
	}
	for {
		b, ok := m.Load(key)
		if !ok {
			return
		}
		t := m.pols.Now()
		if b.Rules() != rs {
			m.Replace(key, b, rs, t)
			continue
		}
		if swept := b.Refund(t, cost); !swept {
			return
		}
		m.Drop(key, b) // swept under us: a new bucket may hold spends since
	}
}

// Peek reports what a cost-1 request for key under rs would get now,
// spending nothing and storing nothing.
func (m *Map[B]) Peek(key string, rs *rules.Rules) keyrate.Decision {
	if rs.Unlimited() {
		return rs.UnlimitedDecision()
	}
	var s States
	t := m.pols.Now()
	b, ok := m.Load(key)
	switch {
	case !ok:
		t = m.floor.Start(rs, t, s[:rs.Len()]) // a new, full bucket
	case b.Rules() == rs:
		var live bool
		if s, live = b.States(); !live {
			t = m.floor.Start(rs, t, s[:rs.Len()])
		}
	default:
		from := b.Rules()
		if old, live := b.States(); live {
			rs.Carry(from, old[:from.Len()], t, s[:rs.Len()])
		} else {
			t = m.floor.Start(rs, t, s[:rs.Len()])
		}
	}
	return rs.Peek(s[:rs.Len()], t)
}

// PeekKey is keyrate.Limiter's Peek: Peek under key's policy (see
// rules.Policies.ForKey). For a key whose policy the store lacks (a
// WithPolicyFunc naming an unknown one) it reports the zero Decision: not
// allowed, as Allow would answer.
func (m *Map[B]) PeekKey(key string) keyrate.Decision {
	return m.pols.Peek(key, func(rs *rules.Rules) keyrate.Decision { return m.Peek(key, rs) })
}

// PeekTier is keyrate.PolicyLimiter's PeekTier: Peek under tier's policy.
func (m *Map[B]) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	return m.pols.PeekTier(tier, func(rs *rules.Rules) keyrate.Decision { return m.Peek(key, rs) })
}

// RefundKey is keyrate.PolicyLimiter's Refund: Refund under key's policy,
// after checking cost.
func (m *Map[B]) RefundKey(key string, cost int) error {
	rs, err := m.pols.ForKey(key)
	if err != nil {
		return err
	}
	if err := rs.CheckCost(cost); err != nil {
		return err
	}
	m.Refund(key, rs, cost)
	return nil
}

// RefundTier is keyrate.PolicyLimiter's RefundTier: Refund under tier's
// policy, after checking cost.
func (m *Map[B]) RefundTier(key string, tier keyrate.Tier, cost int) error {
	rs, err := m.pols.Rules(tier)
	if err != nil {
		return err
	}
	if err := rs.CheckCost(cost); err != nil {
		return err
	}
	m.Refund(key, rs, cost)
	return nil
}
