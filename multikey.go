package keyrate

import (
	"errors"
	"fmt"

	"github.com/keyrate/keyrate/internal/handle"
)

// MaxKeys is the most keys one AllowAll call decides: enough for a user,
// its organisation, an endpoint and a few more, and small enough that the
// call keeps its bookkeeping on the stack.
const MaxKeys = 8

// ErrInvalidKeys reports a key list AllowAll cannot decide: empty, longer
// than MaxKeys, or naming one key twice (a key has one bucket whatever its
// tier, so a key twice would be charged twice). The error names the value
// and its bound.
var ErrInvalidKeys = errors.New("keyrate: invalid key list")

// KeyCost is one key of an AllowAll request: the key, the tier whose
// policy it is decided under (the zero Tier is the default policy) and the
// cost to spend from it, at least 1.
type KeyCost struct {
	Key  string
	Tier Tier
	Cost int
}

// MultiDecision is AllowAll's answer: the request is allowed only if every
// key held its cost. Its Decision is one key's, the key at Index in the
// request: the key that denied it (where several would have, the one
// decided first), or, when it was allowed, the key nearest to denying,
// the one left with the fewest Remaining (the first in the request of
// those). The Decision's Allowed is the request's.
type MultiDecision struct {
	Decision
	// Index is the position, in the request's keys, of the key Decision
	// describes.
	Index int
}

// AllowAll decides one request against several keys of l, each under its
// own tier's policy, all or nothing: the request is allowed, and spends
// every key's cost, only if every key holds its cost; a denied request
// spends from none of them (but see the races below). It is a function of
// any PolicyLimiter rather than a method so that every store, redisbucket
// included, has it from the calls it already makes (a Redis store that
// can decide the keys in one script call offers that too).
//
// On the in-process stores (atomicbucket, mutexbucket, striped), a
// request whose keys the store holds, each under a policy of one window,
// is decided inside the store: it spends the keys in the caller's order,
// and if a key denies, puts back each earlier key's state as it was
// before the spend, exactly, where its state still holds what the spend
// wrote (nobody spent, refunded, swept or moved it since) and no Refund
// ran on the store, on any key, during the call (a refund capped at Burst
// could make the put-back mint a token: docs/guides/policies.md). A state is
// absolute (a token bucket's theoretical arrival time, a window's count),
// so a key put back is as if the request had never touched it, whatever
// the clock did meanwhile: no lasting over-denial, and nothing minted.
// The key named on a deny is then the first in the caller's order that
// lacks its cost. A two-key call costs 2.0–2.2× one AllowTier in
// instructions (docs/guides/policies.md has the figures).
//
// Every other request (a new key, a key under another policy than its
// tier's, several windows, a sliding log, an unlimited tier, a store with
// an observer, any other store) is decided in turn: it checks every key
// but the last (PolicyLimiter.PeekTier, which spends nothing), then
// spends them one by one with AllowTier: a checked key that does not hold
// its cost first, else the last key (its spend is its check), then the
// other keys, the least to spare first. So a request a key's limit
// denies (or that a key refuses with an error) before anything was spent
// spends nothing. Either way each spend is the store's own, so every key
// keeps its bound, Burst + Rate·T/Per over any interval T, however many
// calls run at once, whatever the tier moves and evictions.
//
// Two effects of deciding the keys in turn, each bounded by the costs:
//   - While the call runs, a key already spent holds its cost less: a
//     concurrent request on that key may be denied that would have been
//     allowed had this call been denied, for the length of the call (the
//     transient window, on either path).
//   - A key spent before the denier whose state another request touched
//     meanwhile, or spent while a Refund ran on the store (inside a
//     store), or any key spent before a denier that
//     another request drained after the check (in turn), keeps its spend:
//     nothing is given back, because a refund made at a later clock
//     reading than its spend can hand back tokens the key would have
//     refilled anyway, which over-admits (a bucket near full at the
//     spend, refilling while other requests drain it). Each such key is
//     charged as if the request had been allowed on it: its cost, once.
//     AllowAll never over-admits, and over-denies only on such a race.
//
// It returns an error, and spends nothing, wrapping ErrInvalidKeys for an
// empty list, more than MaxKeys keys or a key given twice, ErrInvalidCost
// for a cost below 1, and a key's error (ErrUnknownPolicy,
// ErrCostExceedsBurst, ErrStoreFull, a store's own) found before a spend;
// an error from a later spend of the checks in turn leaves the keys spent
// before it spent, as a race does. Errors name the key's index. It
// allocates nothing on keys the store knows.
func AllowAll(l PolicyLimiter, keys []KeyCost) (MultiDecision, error) {
	if m, ok := l.(multiLimiter); ok {
		if d, handled, err := m.TryAllowAll(handle.Multi{}, keys); handled {
			return d, err
		}
	}
	return allowInTurn(l, keys)
}

// multiLimiter is a store that decides an AllowAll request itself where
// it can, undoing a denied request's spends exactly (the in-process
// stores, through internal/multi): handled false means it spent nothing,
// and AllowAll decides in turn. Its parameter of an internal type keeps
// the method out of reach of other packages.
type multiLimiter interface {
	TryAllowAll(_ handle.Multi, keys []KeyCost) (d MultiDecision, handled bool, err error)
}

// allowInTurn is AllowAll for a store that does not decide the request
// itself, or a request it leaves to AllowAll: the checks and spends in
// turn that AllowAll's documentation describes.
func allowInTurn(l PolicyLimiter, keys []KeyCost) (MultiDecision, error) {
	if err := ValidateKeys(keys); err != nil {
		return MultiDecision{}, err
	}
	// Every key but the last is checked: spare[i] is what key i holds
	// beyond its cost, and order[:last] those keys by spare, least first
	// (an insertion sort of at most MaxKeys-1).
	last := len(keys) - 1
	var (
		spare [MaxKeys]int
		order [MaxKeys]uint8
	)
	for i, k := range keys[:last] {
		p, err := l.PeekTier(k.Key, k.Tier)
		if err != nil {
			return MultiDecision{Index: i}, fmt.Errorf("key %d (%q): %w", i, k.Key, err)
		}
		spare[i] = p.Remaining - k.Cost
		j := i
		for ; j > 0 && spare[order[j-1]] > spare[i]; j-- {
			order[j] = order[j-1]
		}
		order[j] = uint8(i)
	}
	// The spends: a checked key that lacks its cost first, then the last
	// key, then the other checked keys, least to spare first.
	first := 0
	if last > 0 && spare[order[0]] < 0 {
		first = 1
	}
	copy(order[first+1:last+1], order[first:last])
	order[first] = uint8(last)
	var best MultiDecision
	for n, o := range order[:len(keys)] {
		i := int(o)
		d, err := l.AllowTier(keys[i].Key, keys[i].Tier, keys[i].Cost)
		if err != nil {
			return MultiDecision{Index: i}, fmt.Errorf("key %d (%q): %w", i, keys[i].Key, err)
		}
		if !d.Allowed {
			return MultiDecision{Decision: d, Index: i}, nil
		}
		if n == 0 || d.Remaining < best.Remaining || d.Remaining == best.Remaining && i < best.Index {
			best = MultiDecision{Decision: d, Index: i}
		}
	}
	return best, nil
}

// ValidateKeys reports whether AllowAll can decide keys, as AllowAll
// checks them before it decides anything: 1 to MaxKeys keys, each named
// once, each cost at least 1. It returns nil, or an error wrapping
// ErrInvalidKeys or ErrInvalidCost that names the key's index, the value
// and its bound. A store that decides several keys its own way (such as
// redisbucket's one script call) checks them with it.
func ValidateKeys(keys []KeyCost) error {
	switch {
	case len(keys) == 0:
		return fmt.Errorf("%w: no keys (at least 1)", ErrInvalidKeys)
	case len(keys) > MaxKeys:
		return fmt.Errorf("%w: %d keys, above the most of %d", ErrInvalidKeys, len(keys), MaxKeys)
	}
	for i, k := range keys {
		if k.Cost < 1 {
			return fmt.Errorf("%w: key %d (%q): cost %d is below 1", ErrInvalidCost, i, k.Key, k.Cost)
		}
		for j := range i {
			if keys[j].Key == k.Key {
				return fmt.Errorf("%w: key %d (%q) is key %d again", ErrInvalidKeys, i, k.Key, j)
			}
		}
	}
	return nil
}
