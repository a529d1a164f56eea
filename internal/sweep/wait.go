package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/tick"
)

// This file is keyrate.WaitLimiter's front, which every in-process store
// shares: picking the policy, checking the cost, and turning a store's
// reservation into a Reservation or a Wait. A store supplies only what
// differs between stores, its known-key fast path and its slow path, as a
// Reserver.

// Reserver is a store's reservation under a compiled policy. A store
// implements it on an unexported adapter type (so that these methods stay
// out of its API), which is then the Canceler of the Reservations it
// makes.
type Reserver interface {
	rules.Canceler
	// ReserveOne is the store's fast path: for a known key under rs, a
	// policy of one window, whose bucket is live, it reserves cost within
	// wait (rules.Rule.Reserve) and returns the state after the call,
	// the reading it was decided at and whether it reserved; for any
	// other key it reports a miss (hit false) and does nothing.
	ReserveOne(key string, rs *rules.Rules, cost int, wait time.Duration) (state rules.State, t time.Duration, ok, hit bool)
	// ReserveRare is the store's slow path, after ReserveOne missed:
	// Reserve under rs, a policy with windows, inserting or carrying the
	// key's bucket as a spend does.
	ReserveRare(key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error)
}

// Reserve is keyrate.WaitLimiter's Reserve for a store with policies pols
// and reservations f.
func Reserve(pols *rules.Policies, f Reserver, key string, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	rs, err := rulesFor(pols, key)
	if err != nil {
		pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
		return keyrate.Reservation{}, err
	}
	r, err := reserve(f, key, rs, cost, maxWait)
	observe(pols, key, rs, cost, r, err)
	return r, err
}

// ReserveTier is keyrate.WaitLimiter's ReserveTier (see Reserve).
func ReserveTier(pols *rules.Policies, f Reserver, key string, tier keyrate.Tier, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	rs, err := pols.Rules(tier)
	if err != nil {
		pols.ObserveMiss(key, tier, cost, err)
		return keyrate.Reservation{}, err
	}
	r, err := reserve(f, key, rs, cost, maxWait)
	observe(pols, key, rs, cost, r, err)
	return r, err
}

// Wait is keyrate.WaitLimiter's Wait (see Reserve).
func Wait(ctx context.Context, pols *rules.Policies, f Reserver, key string, cost int) error {
	budget, err := tick.WaitBudget(ctx)
	if err != nil {
		pols.ObserveMiss(key, keyrate.Tier{}, cost, err) // a call all the same
		return err
	}
	rs, err := rulesFor(pols, key)
	if err != nil {
		pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
		return err
	}
	return wait(ctx, pols, f, key, rs, cost, budget)
}

// WaitTier is keyrate.WaitLimiter's WaitTier (see Reserve).
func WaitTier(ctx context.Context, pols *rules.Policies, f Reserver, key string, tier keyrate.Tier, cost int) error {
	budget, err := tick.WaitBudget(ctx)
	if err != nil {
		pols.ObserveMiss(key, tier, cost, err) // a call all the same
		return err
	}
	rs, err := pols.Rules(tier)
	if err != nil {
		pols.ObserveMiss(key, tier, cost, err)
		return err
	}
	return wait(ctx, pols, f, key, rs, cost, budget)
}

// rulesFor is key's policy: the default unless WithPolicyFunc chooses,
// with no call when it cannot.
func rulesFor(pols *rules.Policies, key string) (*rules.Rules, error) {
	if !pols.HasFunc() {
		return pols.Default(), nil
	}
	return pols.ForKey(key)
}

// reserve is Reserve under rs.
func reserve(f Reserver, key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Reservation{}, err
	}
	if rs.IsLog() {
		return keyrate.Reservation{}, noWait(rs)
	}
	if rs.Unlimited() {
		return rs.Reserved(f, key, nil, rs.Now(), cost, wait, -1), nil
	}
	if state, t, ok, hit := f.ReserveOne(key, rs, cost, wait); hit {
		st := [1]rules.State{state}
		return rs.Reserved(f, key, st[:], t, cost, wait, Denied(ok)), nil
	}
	return f.ReserveRare(key, rs, cost, wait)
}

// wait is Wait under rs, with the wait ctx allows. A known key whose
// tokens are there returns from the fast path, building no Reservation.
func wait(ctx context.Context, pols *rules.Policies, f Reserver, key string, rs *rules.Rules, cost int, wait time.Duration) error {
	if pols.Observer() != nil {
		r, err := reserve(f, key, rs, cost, wait)
		observe(pols, key, rs, cost, r, err)
		if err != nil {
			return err
		}
		return r.Wait(ctx)
	}
	if err := rs.CheckCost(cost); err != nil || rs.Unlimited() {
		return err
	}
	if rs.IsLog() {
		return noWait(rs)
	}
	if state, t, ok, hit := f.ReserveOne(key, rs, cost, wait); hit {
		if r := rs.Rule(0); ok && !r.Waits(state, r.Ticks(t)) {
			return nil
		}
		st := [1]rules.State{state}
		return rs.Reserved(f, key, st[:], t, cost, wait, Denied(ok)).Wait(ctx)
	}
	r, err := f.ReserveRare(key, rs, cost, wait)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// observe tells pols' observer, if it has one, of the reservation r (or
// the error err) of cost under rs for key.
func observe(pols *rules.Policies, key string, rs *rules.Rules, cost int, r keyrate.Reservation, err error) {
	if pols.Observer() != nil {
		pols.Observe(key, rs.Name(), cost, err == nil && r.OK(), err)
	}
}

// noWait is the error of Reserve and Wait under a SlidingLog policy rs,
// which never waits: it wraps keyrate.ErrUnsupportedAlgorithm.
func noWait(rs *rules.Rules) error {
	return fmt.Errorf("%w: policy %q counts with %v, which does not reserve or wait (use AllowN)", keyrate.ErrUnsupportedAlgorithm, rs.Name(), keyrate.SlidingLog)
}
