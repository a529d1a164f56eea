package redisbucket

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/tick"
	"github.com/keyrate/keyrate/internal/wrap"
)

// Reserve is ReserveContext with context.Background(): still bounded by
// the store's timeout.
func (s *Store) Reserve(key string, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	return s.ReserveContext(context.Background(), key, cost, maxWait)
}

// ReserveContext reserves cost tokens of key, under key's policy (as
// AllowNContext chooses it), for the earliest slot at which every window
// holds them, if that is at most maxWait away, in one round trip to Redis
// bounded by ctx and the store's timeout: the script decides as an
// in-process store does, on the server's clock. Otherwise it reserves
// nothing and returns a Reservation whose OK is false and whose Delay is
// the wait it would have needed. A maxWait of 0 or less reserves only
// what is there now: it is AllowNContext. See keyrate.WaitLimiter.
//
// The Reservation's slot is a reading of the store's local clock (the
// time source of WithTimeSource, or clock.System()): the reading taken
// when Redis answered plus the wait the server computed, so that its Wait
// sleeps in this process, sending nothing to Redis. A slot is therefore
// late by up to the reply's latency (for clocks that run at the same
// rate), never early. The script refuses a reservation that would leave a
// window owing more than 2^62 in-process ticks (over ten years), the
// bound an in-process store puts on one window's wait, or put a window's TAT
// past 2^53 µs of Unix time (the year 2255), as if it needed more than
// maxWait. (For several windows an in-process store refuses instead a
// slot past its clock range, 2^62 ticks after its creation.)
//
// It returns the errors of AllowNContext, and one wrapping
// keyrate.ErrUnsupportedAlgorithm, sending nothing, under a policy with a window
// algorithm (keyrate.FixedWindow, SlidingWindow) or a keyrate.SlidingLog,
// which the scripts do not reserve under (nor do the in-process stores
// under a log). If Redis fails to answer within
// the timeout, the failure policy answers (see FailurePolicy): FailClosed
// returns an error wrapping ErrUnavailable, FailOpen an OK Reservation
// with no delay, and FallbackLocal the fallback store's reservation (whose
// Cancel is the fallback's), or, for a cost the fallback can never allow,
// an error wrapping ErrUnavailable and the fallback's error.
func (s *Store) ReserveContext(ctx context.Context, key string, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	ctx = orBackground(ctx)
	rs, err := s.pols.ForKey(key)
	if err != nil {
		s.pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
		return keyrate.Reservation{}, err
	}
	return s.reserve(ctx, key, rs, cost, maxWait)
}

// ReserveTier is ReserveTierContext with context.Background().
func (s *Store) ReserveTier(key string, tier keyrate.Tier, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	return s.ReserveTierContext(context.Background(), key, tier, cost, maxWait)
}

// ReserveTierContext is ReserveContext under tier's policy. It returns an
// error wrapping keyrate.ErrUnknownPolicy for a Tier of another store.
func (s *Store) ReserveTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	ctx = orBackground(ctx)
	rs, err := s.pols.Rules(tier)
	if err != nil {
		s.pols.ObserveMiss(key, tier, cost, err)
		return keyrate.Reservation{}, err
	}
	return s.reserve(ctx, key, rs, cost, maxWait)
}

// Wait spends cost tokens of key, under key's policy, waiting for them if
// the bucket lacks them now: one round trip to Redis (ReserveContext with
// the time left until ctx's deadline as the maximum wait, bounded by ctx
// and the store's timeout), then a sleep on the store's local clock that
// sends nothing. See keyrate.WaitLimiter for its errors; it also returns
// those of ReserveContext, and the failure policy's answer when Redis does
// not answer: an error wrapping ErrUnavailable under FailClosed, nil at
// once under FailOpen, and the fallback store's Wait under FallbackLocal.
// If ctx is done while it sleeps, it cancels its reservation (one more
// round trip: Cancel) and returns ctx.Err().
func (s *Store) Wait(ctx context.Context, key string, cost int) error {
	wait, err := tick.WaitBudget(ctx)
	if err != nil {
		s.pols.ObserveMiss(key, keyrate.Tier{}, cost, err) // a call all the same
		return err
	}
	rs, err := s.pols.ForKey(key)
	if err != nil {
		s.pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
		return err
	}
	return s.wait(ctx, key, rs, cost, wait)
}

// WaitTier is Wait under tier's policy. It returns an error wrapping
// keyrate.ErrUnknownPolicy for a Tier of another store.
func (s *Store) WaitTier(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	wait, err := tick.WaitBudget(ctx)
	if err != nil {
		s.pols.ObserveMiss(key, tier, cost, err) // a call all the same
		return err
	}
	rs, err := s.pols.Rules(tier)
	if err != nil {
		s.pols.ObserveMiss(key, tier, cost, err)
		return err
	}
	return s.wait(ctx, key, rs, cost, wait)
}

// wait is Wait under rs, with the maximum wait WaitBudget gave.
func (s *Store) wait(ctx context.Context, key string, rs *rules.Rules, cost int, wait time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := s.reserve(ctx, key, rs, cost, wait)
	if err != nil {
		return err
	}
	return r.Wait(ctx)
}

// reserve is ReserveContext under rs, told to the store's observer.
func (s *Store) reserve(ctx context.Context, key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	r, err, degraded := s.reserveDecide(ctx, key, rs, cost, wait)
	if s.pols.Observer() != nil {
		s.pols.ObserveEvent(keyrate.Event{Key: key, Policy: rs.Name(), Cost: cost, Allowed: err == nil && r.OK(), Err: err, Degraded: degraded})
	}
	return r, err
}

// reserveDecide is reserve's reservation, and whether the failure policy
// made it (Redis failed).
func (s *Store) reserveDecide(ctx context.Context, key string, rs *rules.Rules, cost int, wait time.Duration) (_ keyrate.Reservation, _ error, degraded bool) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Reservation{}, err, false
	}
	if err := checkKey(key); err != nil {
		return keyrate.Reservation{}, err, false
	}
	if rs.Unlimited() {
		t := s.localClock().Now()
		return rules.NewReservation(s, key, rs, 0, t, t, wait, cost, true), nil, false
	}
	if err := ctx.Err(); err != nil {
		return keyrate.Reservation{}, fmt.Errorf("redisbucket: %w", err), false
	}
	p, err := s.plan(rs)
	if err != nil {
		return keyrate.Reservation{}, err, false // checked by New or SetPolicy: cannot fail
	}
	if p.lcm > 0 || p.log {
		return keyrate.Reservation{}, fmt.Errorf("%w: policy %q counts in windows (%v): redisbucket reserves (Reserve, Wait) under token buckets only",
			keyrate.ErrUnsupportedAlgorithm, rs.Name(), rs.Policy().Limits), false
	}
	mode := ""
	if wait > 0 {
		mode = p.waitMode(rs, wait)
	}
	var st [keyrate.MaxLimits]rules.State
	n := rs.Len()
	denied, now, _, err := s.evalMode(ctx, key, rs, cost, mode, st[:n])
	t := p.local.Now() // the reply's arrival, on the clock Wait sleeps on
	if err == nil {
		if denied >= 0 {
			return rules.NewReservation(s, key, p.local, 0, t, after(t, rs.SlotFor(st[:n], 0, cost)), wait, cost, false), nil, false
		}
		// Window 0's TAT in rules.Rule's ticks since the Unix epoch,
		// modulo 2^64: its debt plus now (see gcraScript's cancel).
		u := p.units[0]
		end := rules.State(uint64(now)*uint64(u.k)*u.g + uint64(st[0]))
		return rules.NewReservation(s, key, p.local, end, t, after(t, rs.Slot(st[:n], 0)), wait, cost, true), nil, false
	}
	if ctx.Err() != nil {
		return keyrate.Reservation{}, fmt.Errorf("redisbucket: %w", ctx.Err()), false
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return rules.NewReservation(s, key, p.local, 0, t, t, wait, cost, true), nil, true
	case FallbackLocal:
		tier, ferr := s.fallback.Tier(rs.Name())
		if ferr == nil {
			var r keyrate.Reservation
			if r, ferr = s.fallback.ReserveTier(key, tier, cost, wait); ferr == nil {
				return r, nil, true
			}
		}
		return keyrate.Reservation{}, fmt.Errorf("%w (and the fallback store cannot serve it: %w)", err, ferr), true
	}
	return keyrate.Reservation{}, err, true
}

// after returns the reading d after reading t, saturating at the longest
// time.Duration.
func after(t, d time.Duration) time.Duration {
	if d > 0 && t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// waitMode returns the script's mode for a reservation under rs with
// maximum wait wait > 0: "R:u:x", the wait in whole µs u plus x, in
// rules.Rule's ticks for one window (rules.Rule.WaitTicks, as
// rules.Rules.Reserve decides one window), in ns for several.
func (p *plan) waitMode(rs *rules.Rules, wait time.Duration) string {
	if len(p.units) == 1 {
		kg := uint64(p.units[0].k) * p.units[0].g // rules.Rule's ticks per µs
		w := rs.Rule(0).WaitTicks(wait)
		return fmt.Sprintf("R:%d:%d", w/kg, w%kg)
	}
	u, x := int64(wait/time.Microsecond), int64(wait%time.Microsecond)
	if u >= maxDebtMicros { // past any TAT the script writes
		u, x = maxDebtMicros, 0
	}
	return fmt.Sprintf("R:%d:%d", u, x)
}

// Cancel is CancelContext with context.Background(), reporting only
// whether it gave the tokens back: false also when Redis does not answer.
// Reservation.Cancel calls it.
func (s *Store) Cancel(r keyrate.Reservation) bool {
	ok, _ := s.CancelContext(context.Background(), r)
	return ok
}

// CancelContext gives back the tokens of a reservation this store made
// whose slot has not come, if the key's bucket has not changed since (see
// keyrate.Reservation.Cancel), and reports whether it did, in one round
// trip bounded by ctx and the store's timeout. The script gives the cost
// back to every window iff the key is still under the reservation's
// policy, window 0 still holds the state the reservation left (its TAT, in
// in-process ticks since the Unix epoch modulo 2^64) and some window still owes more than its Burst: for the latest
// reservation on the key, exactly when its slot has not come on the
// server's clock.
//
// It gives nothing back, sending nothing, for a reservation that is not
// OK, had no delay, whose slot has come on the store's local clock, that
// was made under a policy SetPolicy has since replaced, or by another
// store; except that under FallbackLocal a reservation made by the
// fallback store is the fallback's to cancel. If Redis fails to answer it
// gives nothing back (the tokens stay spent, which never admits more than
// the limit) and returns an error wrapping ErrUnavailable, whatever the
// failure policy; if ctx is done first, one wrapping ctx.Err(). After
// such a failure the reservation is never cancelled again (Redis may have
// given the tokens back before the answer was lost): a later Cancel gives
// nothing back.
func (s *Store) CancelContext(ctx context.Context, r keyrate.Reservation) (bool, error) {
	ctx = orBackground(ctx)
	local := rules.ReservationRules(r)
	if !r.OK() || local == nil || local.Unlimited() || r.Delay() <= 0 {
		return false, nil
	}
	p := s.current(local.Name())
	if p == nil || p.local != local {
		if s.fallback != nil {
			return s.fallback.Cancel(r), nil
		}
		return false, nil
	}
	if local.Now() >= r.At() || checkKey(r.Key()) != nil {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redisbucket: %w", err)
	}
	// Claimed until the script certainly gave nothing back: a cancel
	// whose outcome is unknown (Redis did not answer) may have, and r
	// must then never give its tokens back again.
	if !rules.ClaimCancel(r) {
		return false, nil
	}
	end := uint64(rules.ReservationEnd(r))
	res, err := s.run(ctx, s.redisKey(r.Key()), p, r.Cost(), fmt.Sprintf("C:%d:%d", end>>32, end&math.MaxUint32))
	if s.deny != nil {
		s.deny.drop(r.Key())
	}
	if err == nil && (len(res) != 1 || res[0] < 0 || res[0] > 1) {
		err = fmt.Errorf("script returned %v to a cancel, want 0 or 1", res)
	}
	if err == nil && res[0] == 0 || err == errRefused { // certainly nothing given back
		rules.UnclaimCancel(r)
	}
	if err == errRefused {
		return false, wrap.Errorf("%w: %w", ErrUnavailable, err) // counted by the breaker
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("redisbucket: %w", ctx.Err())
		}
		return false, s.fail(err)
	}
	return res[0] == 1, nil
}

// current returns the plan of the current version of the policy named
// name, or nil if no request has compiled it (or there is no such
// policy): a reservation under it would have.
func (s *Store) current(name string) *plan {
	tier, err := s.pols.Tier(name)
	if err != nil {
		return nil
	}
	rs, err := s.pols.Rules(tier)
	if err != nil {
		return nil
	}
	p, ok := s.plans.Load(rs)
	if !ok {
		return nil
	}
	return p.(*plan)
}

// localClock returns the clock the store's reservations are read on: the
// time source of WithTimeSource, or clock.System().
func (s *Store) localClock() clock.Clock {
	if s.set.timeSource != nil {
		return s.set.timeSource
	}
	return clock.System()
}
