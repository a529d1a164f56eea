package atomicbucket

import (
	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/multi"
	"github.com/keyrate/keyrate/internal/retries"
	"github.com/keyrate/keyrate/internal/rules"
)

// TryAllowAll is keyrate.AllowAll's path inside the store, which
// keyrate.AllowAll takes on its own (the first parameter's type is
// internal: no other package can call it). It spends the keys in turn,
// one compare-and-swap each, and if a key denies, puts back the state
// word of each key spent before it with one compare-and-swap, if the word
// still holds what the spend wrote (internal/multi). It reports handled
// false, having spent nothing, where keyrate.AllowAll decides in turn
// instead: an observer, a hot key (WithHotKeys), a key of several windows
// or no limit, or a key the store does not hold under its tier's policy.
//
// A request with a hot key is decided in turn, after its hot keys' shards
// are given back (Drain): AllowAll checks a key with PeekTier, which reads
// the word alone, and a hot key whose word lacks its cost while its shards
// hold it would be spent first and keep that spend when a later key
// denies. (Not in the store: a give-back is not exact when the word was
// full at its reading, and an undo after one could put back a word that
// a spend since brought back to what AllowAll wrote, as a refund could.)
func (s *Store) TryAllowAll(_ handle.Multi, keys []keyrate.KeyCost) (keyrate.MultiDecision, bool, error) {
	if s == nil { // AllowAll's error
		return keyrate.MultiDecision{}, false, nil
	}
	if s.hot != nil {
		if len(keys) > keyrate.MaxKeys { // AllowAll's error, with nothing given back
			return keyrate.MultiDecision{}, false, nil
		}
		hot := false
		for i := range keys {
			if k := s.hot.find(keys[i].Key); k != nil {
				k.Drain()
				hot = true
			}
		}
		if hot {
			return keyrate.MultiDecision{}, false, nil
		}
	}
	return multi.AllowAll((*multiStore)(s), s.pols, keys)
}

// multiStore is the store as a multi.Store: a spend is a compare-and-swap
// on the key's slot, an undo another. A slot is never reused for another
// key or policy (casmap), and a dead or moved slot's word is a sentinel
// no swap succeeds on, so the slot itself says the key is the same.
type multiStore Store

// SpendKnown is spend on a known one-window key. See multi.Store.
func (m *multiStore) SpendKnown(key string, rs *rules.Rules, now uint64, cost int) (multi.Spend[*casmap.Slot], bool, bool) {
	slot := m.slot(key, rs)
	if slot == nil {
		return multi.Spend[*casmap.Slot]{}, false, false
	}
	r := rs.Rule(0)
	for {
		old := slot.Load()
		if old >= casmap.Moved {
			return multi.Spend[*casmap.Slot]{}, false, false
		}
		next, ok := rules.State(0), false
		if rs.OneBucket() { // the token bucket's arithmetic, inlined
			next, ok = r.ReserveBucket(old, now, cost, 0)
		} else {
			next, ok = r.Reserve(old, now, cost, 0)
		}
		if !ok {
			return multi.Spend[*casmap.Slot]{Old: old, New: old}, false, true
		}
		if slot.CompareAndSwap(old, next) {
			return multi.Spend[*casmap.Slot]{Ref: slot, Old: old, New: next}, true, true
		}
		retries.Add(now)
	}
}

// slot returns key's slot if the store holds key under rs, else nil.
func (m *multiStore) slot(key string, rs *rules.Rules) *casmap.Slot {
	var slot *casmap.Slot
	var of *rules.Rules
	if casmap.Short(key) { // lookup, inlined by hand as on the hot path
		slot, of, _ = m.m.Lookup(key)
	} else {
		slot, of = m.m.LookupLong(key, m.m.Hash(key))
	}
	if of != rs {
		return nil
	}
	return slot
}

// LoadKnown reads a known one-window key's word. See multi.Store.
func (m *multiStore) LoadKnown(key string, rs *rules.Rules) (rules.State, bool) {
	slot := m.slot(key, rs)
	if slot == nil {
		return 0, false
	}
	st := slot.Load()
	return st, st < casmap.Moved
}

// Refunds returns the store's refund guard. See multi.Store.
func (m *multiStore) Refunds() *multi.Refunds { return &m.refunds }

// Undo puts back a spend's state if the slot's word still holds it. See
// multi.Store.
func (m *multiStore) Undo(sp multi.Spend[*casmap.Slot]) bool {
	cur := sp.Ref.Load()
	old, ok := sp.Restore(cur)
	return ok && sp.Ref.CompareAndSwap(cur, old)
}
