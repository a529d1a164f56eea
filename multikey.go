package keyrate

import (
	"errors"
	"fmt"

	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/isnil"
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
// request: a key that denied it (where several lacked their cost, the
// one of those found short with the longest RetryAfter, so that the
// request made again then is not denied by a slower key: every key found
// short, on a store that decides the request itself; see AllowAll), or,
// when it was allowed, the key nearest to denying, the one left with the
// fewest Remaining (the first in the request of those). The Decision's
// Allowed is the request's.
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
// any PolicyLimiter, so every store has it; redisbucket's Store also
// offers its own, one script call where the keys share a slot.
//
// On the in-process stores (atomicbucket, mutexbucket, striped), a
// request whose keys the store holds, each
// under a policy of one window, is decided inside the store: it spends the
// keys in the caller's order and, if a key denies, puts each earlier key's
// state back exactly as it was, unless the state moved since (another
// request spent, refunded, swept or moved the key) or a Refund ran on the
// store during the call. Every other request (a new key, several windows,
// a sliding log, an unlimited tier, a store with an observer, any other
// store) is decided in turn: every key but the last checked with PeekTier,
// then each spent with AllowTier (a key the check found short first, else
// the last key, whose spend is its check, then the rest, least to spare
// first).
//
// A denied request inside the store names, of the keys that lack their
// cost, the one with the longest RetryAfter (the first of those): the
// keys after the denier are read, not spent, on the denied path alone.
// In turn it names the key whose spend denied (PeekTier tells a cost-1
// wait only, so a checked key's wait for its cost is not known), and a
// retry after its RetryAfter can still meet a slower key's deny.
// docs/guides/policies.md has the mechanics and the costs (a two-key call,
// 2.0–2.2× one AllowTier in instructions).
//
// Every spend is the store's own, so every key keeps its bound,
// Burst + Rate·T/Per over any interval T, under any concurrency. The
// races cost over-denial only, bounded by the costs: while a call runs, a
// key it has spent holds its cost less (the transient window); and a key
// spent before the denier that could not be put back (its state moved, a
// refund ran, or in turn another request drained it after the check)
// keeps its spend, charged its cost once, as if allowed. It is never
// refunded: a refund at a later clock reading than the spend can over-admit.
//
// It returns an error, and spends nothing, wrapping ErrInvalidOption for
// a nil l (or a nil pointer of a store's type), ErrInvalidKeys for an
// empty list, more than MaxKeys keys or a key given twice, ErrInvalidCost
// for a cost below 1, and a key's error (ErrUnknownPolicy,
// ErrCostExceedsBurst, ErrStoreFull, a store's own) found before a spend;
// an error from a later spend of the checks in turn leaves the keys spent
// before it spent, as a race does. Errors name the key's index. It
// allocates nothing on keys the store knows.
func AllowAll(l PolicyLimiter, keys []KeyCost) (MultiDecision, error) {
	if l == nil {
		return MultiDecision{}, fmt.Errorf("%w: keyrate.AllowAll: no limiter", ErrInvalidOption)
	}
	if m, ok := l.(multiLimiter); ok {
		if d, handled, err := m.TryAllowAll(handle.Multi{}, keys); handled {
			return d, err
		}
	}
	// A nil pointer of a store's type: TryAllowAll leaves it here (the
	// reflection is off the in-store path).
	if isnil.Is(l) {
		return MultiDecision{}, fmt.Errorf("%w: keyrate.AllowAll: the limiter is a nil %T", ErrInvalidOption, l)
	}
	return allowInTurn(l, keys)
}

// multiLimiter is a store that decides an AllowAll request itself where
// it can, undoing a denied request's spends exactly (the in-process
// stores, through internal/multi; a nil one answers handled false):
// handled false means it spent nothing,
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
