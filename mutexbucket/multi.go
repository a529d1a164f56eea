package mutexbucket

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
// each under its bucket's mutex, and if a key denies, puts back the state
// of each key spent before it, under its mutex, if the bucket still holds
// what the spend wrote (internal/multi). It reports handled false, having
// spent nothing, where keyrate.AllowAll decides in turn instead: an
// observer, hashed keys (keyrate.WithHashedKeys), a key of several
// windows, a sliding log or no limit, or a key the store does not hold
// under its tier's policy.
func (s *Store) TryAllowAll(_ handle.Multi, keys []keyrate.KeyCost) (keyrate.MultiDecision, bool, error) {
	if s == nil { // AllowAll's error
		return keyrate.MultiDecision{}, false, nil
	}
	if s.strs == nil {
		return keyrate.MultiDecision{}, false, nil
	}
	return multi.AllowAll((*multiStore)(s), s.pols, keys)
}

// multiStore is the store as a multi.Store. A bucket is one key's under
// one policy for its whole life: a swept bucket's state is rules.Tombstone
// for good, and a key moved to another policy gets a new bucket, so the
// bucket itself says the key is the same.
type multiStore Store

// SpendKnown is spend on a known one-window key, under its mutex. See
// multi.Store.
func (m *multiStore) SpendKnown(key string, rs *rules.Rules, now uint64, cost int) (multi.Spend[*bucket], bool, bool) {
	b := m.bucket(key, rs)
	if b == nil {
		return multi.Spend[*bucket]{}, false, false
	}
	r := rs.Rule(0)
	b.mu.Lock()
	old := b.b.First()
	if old >= sweep.Fresh { // swept, or not spent from yet
		b.mu.Unlock()
		return multi.Spend[*bucket]{}, false, false
	}
	next, ok := rules.State(0), false
	if rs.OneBucket() { // the token bucket's arithmetic, inlined
		next, ok = r.ReserveBucket(old, now, cost, 0)
	} else {
		next, ok = r.Reserve(old, now, cost, 0)
	}
	if !ok {
		b.mu.Unlock()
		return multi.Spend[*bucket]{Old: old, New: old}, false, true
	}
	b.b.SetFirst(next)
	b.mu.Unlock()
	return multi.Spend[*bucket]{Ref: b, Old: old, New: next}, true, true
}

// bucket returns key's bucket if the store holds key under rs, else nil.
func (m *multiStore) bucket(key string, rs *rules.Rules) *bucket {
	b, found := m.strs.Load(key)
	if !found || b.b.Rules != rs {
		return nil
	}
	return b
}

// LoadKnown reads a known one-window key's state, under its mutex. See
// multi.Store.
func (m *multiStore) LoadKnown(key string, rs *rules.Rules) (rules.State, bool) {
	b := m.bucket(key, rs)
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	st := b.b.First()
	b.mu.Unlock()
	return st, st < sweep.Fresh
}

// Refunds returns the store's refund guard. See multi.Store.
func (m *multiStore) Refunds() *multi.Refunds { return &m.refunds }

// Undo puts back a spend's state, under the bucket's mutex, if the bucket
// still holds it. See multi.Store.
func (m *multiStore) Undo(sp multi.Spend[*bucket]) bool {
	b := sp.Ref
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := sp.Restore(b.b.First())
	if ok {
		b.b.SetFirst(v)
	}
	return ok
}
