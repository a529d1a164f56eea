// Package multi is keyrate.AllowAll's path inside the in-process stores
// (atomicbucket, mutexbucket, striped): it spends each key of a request
// in turn, in the caller's order, and when a key denies, undoes the spends
// before it exactly where nobody touched them since. The undo record
// (Spend) and the rule that decides whether a spend can be undone
// (Restore) are here, once; a store supplies only its synchronisation
// (Store).
//
// An undo puts back a key's state word as it was before the spend only
// if the word still holds what the spend wrote: a state is absolute (a
// token bucket's theoretical arrival time, a window's index and count),
// so the key is then exactly as if the spend had not been made, whatever
// the clock did meanwhile. It mints nothing (the state put back is one
// the key held, and what ran on the word since added and took back exact
// amounts), and leaves no lasting over-denial. If the word moved (a
// spend, a sweep, a carry to another policy), or a refund ran on the
// store meanwhile (a refund can give back less than its cost, and a spend
// after it bring the word back: Refunds), the spend is kept: the key is
// charged its cost, as if the request had been allowed on it, until it
// refills.
package multi

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
)

// Spend is the record of one spend AllowAll may undo: where the key's
// state word is (Ref: a store's slot or bucket), the state before the
// spend (Old) and the one it wrote (New).
type Spend[R any] struct {
	Ref      R
	Old, New rules.State
}

// Restore is the undo rule: given the key's state word now (cur), read
// under the store's synchronisation, it returns the state to store and
// true if the word still holds what the spend wrote, or false, and the
// spend is kept.
func (sp Spend[R]) Restore(cur rules.State) (rules.State, bool) {
	if cur != sp.New {
		return cur, false
	}
	return sp.Old, true
}

// Store is what a store supplies: a spend of a key it knows, and the
// undo of one, each under its own synchronisation.
type Store[R any] interface {
	// SpendKnown spends cost tokens for key under rs, a policy of one
	// window, at tick now, if the store holds key under rs in a live
	// state, and returns the record of the call (its New is the state
	// after it, the state it found on a deny) and whether it spent. For
	// any other key it reports hit false, and does nothing. (Records go
	// by value: a pointer passed through a type parameter's method
	// escapes, and would cost an allocation a call.)
	SpendKnown(key string, rs *rules.Rules, now uint64, cost int) (sp Spend[R], ok, hit bool)
	// LoadKnown returns key's state word, read under the store's
	// synchronisation, and true, if the store holds key under rs, a
	// policy of one window, in a live state; for any other key, false.
	// It writes nothing.
	LoadKnown(key string, rs *rules.Rules) (st rules.State, hit bool)
	// Refunds returns the store's guard, which its Refund and RefundTier
	// go through.
	Refunds() *Refunds
	// Undo puts sp.Old back in the word of sp.Ref, atomically with
	// reading it, if Spend.Restore allows it (the word still holds
	// sp.New, and the slot or bucket is still the key's under the same
	// policy), and reports whether it did.
	Undo(sp Spend[R]) bool
}

// afterSpend is the test hook SetAfterSpend sets.
var afterSpend atomic.Pointer[func(i int)]

// SetAfterSpend makes every AllowAll call f(i) right after its spend of
// key i, before the next key's (and so before any undo of key i), until
// the function it returns is called: a test's way to run another request
// there, every run. Tests only.
func SetAfterSpend(f func(i int)) (restore func()) {
	afterSpend.Store(&f)
	return func() { afterSpend.Store(nil) }
}

// AllowAll decides keys all or nothing on s, whose policies are pols,
// as keyrate.AllowAll's in-store path: it spends every key in the
// caller's order, all at one clock reading taken before the first spend
// (an older reading than a spend's own only holds fewer tokens), and if
// a key denies, undoes the spends before it (Store.Undo). It reports
// handled false, having spent nothing, where it cannot decide the
// request this way: a store with an observer (the generic path tells it
// what it always has), bad input (the generic path's ValidateKeys
// reports it), a key under a policy of several windows, a sliding log or
// no limit, and a key the store does not hold under its tier's policy (new, moved,
// swept): keyrate.AllowAll then decides the request in turn. In that
// last case the spends made before the key are undone first; one a
// concurrent call touched meanwhile is kept, and the fallback charges
// that key again (an over-denial until it refills, never an
// over-admission).
//
// A denied request's decision is that of the short key with the longest
// RetryAfter (the first of those): the denier, or a key after it that the
// store holds under its tier's policy and that lacks its cost too, read
// without a spend (Store.LoadKnown). The keys before the denier held
// their costs. So the request made again after RetryAfter is not denied
// by a slower key than the one named, if nothing else spends first.
//
// It returns, before any spend, for the first key whose tier is not the
// store's or whose cost is above its policy's Burst, that error, naming
// the key's index.
func AllowAll[R any, S Store[R]](s S, pols *rules.Policies, keys []keyrate.KeyCost) (md keyrate.MultiDecision, handled bool, err error) {
	if pols.Observer() != nil || len(keys) == 0 || len(keys) > keyrate.MaxKeys {
		return md, false, nil
	}
	for i := range keys { // the list first, as keyrate.ValidateKeys checks it
		if keys[i].Cost < 1 {
			return md, false, nil
		}
		for j := range i {
			if keys[j].Key == keys[i].Key {
				return md, false, nil
			}
		}
	}
	var rss [keyrate.MaxKeys]*rules.Rules
	for i := range keys {
		k := &keys[i]
		rs, err := pols.Rules(k.Tier)
		if err != nil {
			return keyrate.MultiDecision{Index: i}, true, fmt.Errorf("key %d (%q): %w", i, k.Key, err)
		}
		if rs.Len() != 1 || rs.Unlimited() {
			return md, false, nil
		}
		if k.Cost > rs.Rule(0).Limit().Burst { // CheckCost's case, for its error
			return keyrate.MultiDecision{Index: i}, true, fmt.Errorf("key %d (%q): %w", i, k.Key, rs.CheckCost(k.Cost))
		}
		rss[i] = rs
	}
	var (
		spent [keyrate.MaxKeys]Spend[R]
		best  int // the index of the key left with the fewest tokens
		least int // its tokens
	)
	g := s.Refunds()
	begun, quiet := g.mark()
	t := pols.Now()
	hook := afterSpend.Load()
	for i := range keys {
		r := rss[i].Rule(0)
		now := r.Ticks(t)
		sp, ok, hit := s.SpendKnown(keys[i].Key, rss[i], now, keys[i].Cost)
		if !hit || !ok {
			undo(g, s, begun, quiet, spent[:i])
			if !hit {
				return keyrate.MultiDecision{}, false, nil
			}
			md = keyrate.MultiDecision{Decision: r.Decide(sp.New, now, keys[i].Cost, false), Index: i}
			longest(s, t, rss[i+1:len(keys)], keys[i+1:], &md)
			return md, true, nil
		}
		spent[i] = sp
		if hook != nil {
			(*hook)(i)
		}
		if left := r.Tokens(sp.New, now); i == 0 || left < least {
			best, least = i, left
		}
	}
	r := rss[best].Rule(0)
	md.Decision = r.Decide(spent[best].New, r.Ticks(t), keys[best].Cost, true)
	md.Index = best
	return md, true, nil
}

// longest makes md, a denied request's decision, that of the key of keys
// (after md's, under rss, at clock reading t) that lacks its cost with
// the longest wait, if one waits longer than md's: a read of each key the
// store holds, after the undo, on the denied path alone.
func longest[R any, S Store[R]](s S, t time.Duration, rss []*rules.Rules, keys []keyrate.KeyCost, md *keyrate.MultiDecision) {
	base := md.Index + 1
	for j := range keys {
		st, hit := s.LoadKnown(keys[j].Key, rss[j])
		if !hit {
			continue // not held: a full bucket, which holds any cost up to its Burst
		}
		r := rss[j].Rule(0)
		now := r.Ticks(t)
		if _, ok := r.Reserve(st, now, keys[j].Cost, 0); ok {
			continue
		}
		if d := r.Decide(st, now, keys[j].Cost, false); d.RetryAfter > md.RetryAfter {
			md.Decision, md.Index = d, base+j
		}
	}
}
