package striped

import (
	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/multi"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// TryAllowAll is keyrate.AllowAll's path inside the store, which
// keyrate.AllowAll takes on its own (the first parameter's type is
// internal: no other package can call it). It spends the keys in turn,
// each under its stripe's lock, and if a key denies, puts back the state
// of each key spent before it, under its stripe's lock, if the stripe's
// table has not changed since the spend (its sequence count) and the
// key's slot still holds what the spend wrote (internal/multi). It
// reports handled false, having spent nothing, where keyrate.AllowAll
// decides in turn instead: an observer, a key of several windows, a
// sliding log or no limit, or a key the store does not hold under its
// tier's policy.
func (s *Store) TryAllowAll(_ handle.Multi, keys []keyrate.KeyCost) (keyrate.MultiDecision, bool, error) {
	if s == nil { // AllowAll's error
		return keyrate.MultiDecision{}, false, nil
	}
	return multi.AllowAll((*multiStore)(s), s.pols, keys)
}

// multiStore is the store as a multi.Store.
type multiStore Store

// spot is where a spend was made: a stripe, the key's slot in it, and the
// stripe table's sequence count (flatmap.Map.Version) under the lock of
// the spend. Every change that moves, removes or inserts a key, or
// changes a key's policy, advances the count, so a slot read at an
// unchanged count is the same key under the same policy. (Looking the key
// up again would not do: a key swept and inserted again may hold, by
// chance, the very state the spend wrote, and putting back the old one
// would undo another request's spend.)
type spot struct {
	sp  *stripe
	i   int
	ver uint64
}

// SpendKnown is takeOne's locked spend on a known one-window key. See
// multi.Store.
func (m *multiStore) SpendKnown(key string, rs *rules.Rules, now uint64, cost int) (multi.Spend[spot], bool, bool) {
	sp, i, found := m.lock(key, rs)
	if !found {
		sp.mu.Unlock()
		return multi.Spend[spot]{}, false, false
	}
	r := rs.Rule(0)
	old := sp.m.First(i)
	next, ok := rules.State(0), false
	if rs.OneBucket() { // the token bucket's arithmetic, inlined
		next, ok = r.ReserveBucket(old, now, cost, 0)
	} else {
		next, ok = r.Reserve(old, now, cost, 0)
	}
	if !ok {
		sp.mu.Unlock()
		return multi.Spend[spot]{Old: old, New: old}, false, true
	}
	sp.m.SetFirst(i, next)
	ver := sp.m.Version()
	sp.mu.Unlock()
	return multi.Spend[spot]{Ref: spot{sp, i, ver}, Old: old, New: next}, true, true
}

// lock locks key's stripe and returns it, with key's slot in it and true
// if the stripe holds key under rs in a live state. The caller unlocks.
func (m *multiStore) lock(key string, rs *rules.Rules) (*stripe, int, bool) {
	s := (*Store)(m)
	h, short := s.seed.Short(key)
	if !short {
		h = s.seed.Hash(key)
	}
	sp := s.tab.of(h)
	sp.mu.Lock()
	i, found := sp.m.Find(key, h)
	return sp, i, found && sp.m.Rules(i) == rs && sp.m.First(i) < sweep.Fresh
}

// LoadKnown reads a known one-window key's state, under its stripe's
// lock. See multi.Store.
func (m *multiStore) LoadKnown(key string, rs *rules.Rules) (rules.State, bool) {
	sp, i, found := m.lock(key, rs)
	st := rules.State(0)
	if found {
		st = sp.m.First(i)
	}
	sp.mu.Unlock()
	return st, found
}

// Refunds returns the store's refund guard. See multi.Store.
func (m *multiStore) Refunds() *multi.Refunds { return &m.refunds }

// Undo puts back a spend's state, under the stripe's lock, if the
// stripe's table has not changed and the slot still holds it. See
// multi.Store.
func (m *multiStore) Undo(rec multi.Spend[spot]) bool {
	sp, i := rec.Ref.sp, rec.Ref.i
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.m.Version() != rec.Ref.ver {
		return false
	}
	v, ok := rec.Restore(sp.m.First(i))
	if ok {
		sp.m.SetFirst(i, v)
	}
	return ok
}
