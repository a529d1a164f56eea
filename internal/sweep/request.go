package sweep

import "github.com/keyrate/keyrate"

// This file is the request side that the pointer stores share: their
// configuration, and the slow path of their requests (a new key, a bucket
// not spent from yet or swept under the caller, hashed keys). A store's
// fast path, a known string key whose bucket is live and spent from, stays
// in the store, calling its own bucket type directly: a method of Map[B]
// calls B's methods through the generic dictionary, which is slower and
// cannot be inlined.

// Init configures a store enforcing limit under opts: it compiles limit
// into *policy, which must outlive m, and sets m up, with fresh building a
// new bucket in the given state (always Fresh). It starts the background
// sweeper if opts ask for one. It returns an error wrapping
// keyrate.ErrInvalidLimit or keyrate.ErrInvalidOption if limit or an
// option is out of range, and then starts nothing.
func (m *Map[B]) Init(policy *keyrate.Rule, limit keyrate.Limit, opts []keyrate.Option, fresh func(keyrate.State) B) error {
	set, err := keyrate.Configure(nil, opts...)
	if err != nil {
		return err
	}
	p, err := keyrate.NewRule(limit, set.Clock)
	if err != nil {
		return err
	}
	*policy = p
	m.init(policy, set, fresh)
	return nil
}

// Take spends cost tokens for key if its bucket holds them, inserting a
// bucket for a new key. It returns the state after the call and the tick
// it was decided at, or an error wrapping keyrate.ErrStoreFull for a new
// key that the cap leaves no room for. cost must satisfy CheckCost.
func (m *Map[B]) Take(key string, cost int) (keyrate.State, uint64, bool, error) {
	for {
		b, err := m.Get(key)
		if err != nil {
			return 0, 0, false, err
		}
		// Read after the lookup: a bucket that replaced a swept one is
		// then spent at a tick no older than the sweep's. (A new bucket
		// is read as the floor, which a sweep of another key may raise
		// after this reading: Floor.Start rereads the clock then.)
		now := m.policy.Now()
		if state, at, ok, swept := b.SpendRare(m.policy, now, cost, &m.floor); !swept {
			return state, at, ok, nil
		}
		m.Drop(key, b) // swept under us: look the key up again
	}
}

// Allow is keyrate.Limiter's Allow by way of Take: a store's Allow after
// its fast path missed.
func (m *Map[B]) Allow(key string) bool {
	_, _, ok, _ := m.Take(key, 1)
	return ok
}

// AllowN is keyrate.Limiter's AllowN by way of Take, for a cost that
// satisfies CheckCost: a store's AllowN after its fast path missed.
func (m *Map[B]) AllowN(key string, cost int) (keyrate.Decision, error) {
	state, now, ok, err := m.Take(key, cost)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return m.policy.Decide(state, now, cost, ok), nil
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (m *Map[B]) Peek(key string) keyrate.Decision {
	state := m.Floor() // an unknown key is a new, full bucket
	if b, ok := m.Load(key); ok {
		if v := b.State(); v < Fresh { // not swept, and spent from
			state = v
		}
	}
	return m.policy.Peek(state, m.policy.Now())
}
