package keyrate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/tick"
)

// WaitLimiter is a PolicyLimiter whose callers can wait for tokens rather
// than be denied: a job dispatcher, a crawler, a client of a rate-limited
// API. Every in-process store implements it, and so does redisbucket.
//
// A reservation takes cost tokens for the earliest instant at which the
// key's bucket holds them, its slot: at once if it holds them now, or
// later, as long as the slot is at most a maximum wait away. With GCRA
// this is a spend allowed past the fill time by at most that wait:
// one compare-and-swap in atomicbucket, one locked step in
// the other stores, one script call in redisbucket. Reservations on one
// key get their slots in the order they are made, so waiters are served
// first come, first served, and the bound of the package documentation
// holds for the slots: over any interval of length T at most Burst +
// Rate·T/Per tokens have their slots in it. Wait returns at a reservation's
// slot or later (sleeping can only be late, never early), on the store's
// clock (clock.SleepUntil). A SlidingLog policy never waits: Reserve and
// Wait under it return an error wrapping ErrUnsupportedAlgorithm, and
// spend nothing.
type WaitLimiter interface {
	PolicyLimiter

	// Reserve reserves cost tokens of key, under key's policy, for the
	// earliest slot at which every window holds them, if that is at most
	// maxWait away; otherwise it reserves nothing and returns a
	// Reservation whose OK is false and whose Delay is the wait it would
	// have needed. It returns an error wrapping ErrInvalidCost,
	// ErrCostExceedsBurst (a cost no wait can ever allow), ErrStoreFull
	// or ErrUnknownPolicy as AllowN does, reserving nothing. A maxWait of
	// 0 or less reserves only what is there now: it is AllowN.
	Reserve(key string, cost int, maxWait time.Duration) (Reservation, error)

	// ReserveTier is Reserve under tier's policy.
	ReserveTier(key string, tier Tier, cost int, maxWait time.Duration) (Reservation, error)

	// Wait spends cost tokens of key, under key's policy, waiting for them
	// if the bucket lacks them now, and returns nil once they are spent.
	// It returns at once, having spent nothing, with an error wrapping
	// ErrInvalidCost or ErrCostExceedsBurst for a cost that can never be
	// allowed, ctx.Err() if ctx is done, and an error wrapping both
	// ErrWaitExceedsDeadline and context.DeadlineExceeded if the wait
	// would end after ctx's deadline. If ctx is done while waiting, it
	// cancels its reservation (Reservation.Cancel) and returns ctx.Err().
	// It creates no timer when no wait is needed, and otherwise sleeps on
	// the store's clock, on the calling goroutine. A nil ctx is
	// context.Background().
	//
	// ctx's deadline is a wall-clock instant, and the store's clock need
	// not be the wall clock: the wait is compared with the time left until
	// the deadline (time.Until), as a duration on the store's clock.
	Wait(ctx context.Context, key string, cost int) error

	// WaitTier is Wait under tier's policy.
	WaitTier(ctx context.Context, key string, tier Tier, cost int) error

	// Cancel is r.Cancel(): it gives back the tokens of a reservation
	// made by this store whose slot has not come, if the key's bucket has
	// not changed since, and reports whether it did.
	Cancel(r Reservation) bool
}

// canceler is what a Reservation calls back to cancel itself: the store
// that made it. Every WaitLimiter is one.
type canceler = interface {
	Cancel(r Reservation) bool
}

// Reservation is cost tokens of one key reserved for a slot (see
// WaitLimiter): the instant at which the key's bucket holds them. Its
// zero value reserves nothing. A Reservation is a value, safe to copy;
// its methods may be called from any goroutine. One that waits (OK, with
// a Delay) holds one small allocation that its copies share, which
// records that it was cancelled, so that it gives its tokens back at most
// once; one that need not wait allocates nothing.
//
// A reservation keeps its slot when its key moves to another policy (a
// tier, SetPolicy) before the slot comes, but the new policy counts its
// tokens as spent when it carries the key's state and refills them from
// then: at the slot the key can be admitted up to the reservation's cost
// more than the limit, once (see PolicyLimiter).
//
// A reservation is either used (its holder proceeds at the slot, as Wait
// does) or cancelled, never both: Cancel gives the tokens back to the key,
// and a Wait already sleeping on another copy of the reservation does not
// learn of it, so cancel only a reservation you will not use. Cancel
// tells whether the slot has come by the clock's reading, so on a clock
// stepped back past the slot of a reservation already used (only a
// clock.Manual steps back) it could give back tokens that were used.
//
// For a limit whose token interval is not a whole number of nanoseconds,
// a slot is the exact tick rounded up to the next nanosecond, so two
// slots can lie a fraction of a nanosecond closer than one token
// interval: Wait never returns before the tokens are there, and over any
// interval the slots admit at most Burst + Rate·T/Per tokens measured in
// the store's ticks, which differ from nanoseconds by less than one.
type Reservation struct {
	lim   canceler
	key   string
	rules any           // the compiled policy it was made under
	end   uint64        // window 0's state after the reservation
	t     time.Duration // the clock reading it was made at
	slot  time.Duration // the clock reading of its slot
	wait  time.Duration // the most it was allowed to wait
	cost  int
	ok    bool
	// claim is set by the Cancel that gives the tokens back (and while
	// one is under way), shared by every copy; nil for a reservation
	// that need not wait, which no Cancel gives anything back for.
	claim *atomic.Bool
}

func init() {
	handle.NewReservation = func(lim canceler, key string, rules any, end uint64, t, slot, wait time.Duration, cost int, ok bool) Reservation {
		r := Reservation{lim: lim, key: key, rules: rules, end: end, t: t, slot: slot, wait: wait, cost: cost, ok: ok}
		if ok && slot > t {
			r.claim = new(atomic.Bool)
		}
		return r
	}
	handle.ReservationParts = func(r Reservation) (rules any, end uint64, claim *atomic.Bool) { return r.rules, r.end, r.claim }
}

// OK reports whether the tokens were reserved: their slot was at most the
// maximum wait away.
func (r Reservation) OK() bool { return r.ok }

// Key returns the key the reservation is for.
func (r Reservation) Key() string { return r.key }

// Cost returns the tokens reserved (or asked for, if OK is false).
func (r Reservation) Cost() int { return r.cost }

// Delay returns the wait, from the moment the reservation was made, until
// its slot: 0 if the tokens were there at once. If OK is false it is the
// wait the reservation would have needed.
func (r Reservation) Delay() time.Duration { return tick.Delay(r.slot, r.t) }

// At returns the slot as a reading of the store's clock.
func (r Reservation) At() time.Duration { return r.slot }

// DelayFrom returns the wait from clock reading now until the slot: 0 once
// it has come.
func (r Reservation) DelayFrom(now time.Duration) time.Duration { return tick.Delay(r.slot, now) }

// Cancel gives the reserved tokens back if the slot has not come and no
// request has spent, reserved, refunded or cancelled on the key since the
// reservation was made (a caller giving up on the wait it just reserved,
// or the latest of several waiters), and reports whether it did. The
// reservations made after it keep their slots: none moves later. If the
// key's bucket has changed since, the tokens stay spent, since giving them
// back would let a new request share the slot of a later reservation and
// admit more than the limit; they are lost to the key (it is denied a
// little more than it could have been), never minted. Cancel after the
// slot, or of a reservation that is not OK, gives back nothing. Cancel is
// the store's Cancel.
//
// A reservation gives its tokens back at most once, whichever of its
// copies is cancelled and however often: once a Cancel has given them
// back, every later Cancel of it returns false, even when a later
// reservation has since taken the same slot and left the key's bucket in
// the state this one left (giving that one's tokens away would let a
// third reservation share its slot). A Cancel that gave nothing back,
// because a later request changed the bucket, leaves the reservation
// cancellable, for when it is the latest again. So a deferred Cancel
// after Wait, which cancels by itself when its context ends, is safe.
//
// Under a window algorithm, a reservation counted in a later window than
// the current one moved the key's state to that window, and its state no
// longer holds the current window's count: Cancel takes the cost back off
// the later window but leaves the key there, so until that window starts
// the key is refused what the current window could still have held. Only
// requests of a smaller cost than the cancelled one can lose by it: one of
// that cost or more would not have fitted in the current window either.
//
// Under a policy of several windows, a reservation is decided as if made
// at its slot in every window, and a window whose own tokens were there
// sooner is spent from the slot on: Cancel gives the cost back in every
// window, but such a window stays as at the slot, so until the slot the
// key holds fewer of its tokens than had the reservation never been made
// (at most what that window refills by the slot), and from the slot on it
// is exactly as if it had never been made. (Keeping each window's state
// from before the reservation would make it exact at the price of a larger
// allocation per reservation; see docs/design/carry.md.)
func (r Reservation) Cancel() bool {
	if !r.ok || r.lim == nil || r.rules == nil || r.slot <= r.t {
		return false
	}
	return r.lim.Cancel(r)
}

// Wait sleeps until the slot, on the clock of the store that made the
// reservation, and returns nil then (at once, creating no timer, if the
// slot has come). If ctx is done first it cancels the reservation (see
// Cancel) and returns ctx.Err(); if ctx's deadline comes before the slot
// it cancels at once and returns an error wrapping ErrWaitExceedsDeadline
// and context.DeadlineExceeded. For a reservation that is not OK it
// returns such an error too, naming the wait it needed and the most it was
// allowed; for the zero Reservation, an error saying so. A nil ctx is
// context.Background().
func (r Reservation) Wait(ctx context.Context) error {
	if r.ok && r.slot <= r.t {
		return nil
	}
	return r.sleep(ctx)
}

func (r Reservation) sleep(ctx context.Context) error {
	if r.rules == nil {
		return errZero
	}
	if !r.ok {
		return deadlineError(r.Delay(), r.cost, r.wait)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := r.rules.(interface{ Clock() clock.Clock }).Clock()
	if budget, err := tick.WaitBudget(ctx); err != nil || budget < r.DelayFrom(c.Now()) {
		r.Cancel()
		if err != nil {
			return err
		}
		return deadlineError(r.DelayFrom(c.Now()), r.cost, budget)
	}
	if err := clock.SleepUntil(ctx, c, r.slot); err != nil {
		r.Cancel()
		return err
	}
	return nil
}

// errZero is Wait's error for the zero Reservation.
var errZero = errors.New("keyrate: Wait on the zero Reservation, which no store made")

// deadlineError is the error of a wait that would end after the deadline:
// a wait of delay for cost, with left until the deadline.
func deadlineError(delay time.Duration, cost int, left time.Duration) error {
	return fmt.Errorf("%w: waiting %v for a cost of %d would pass the deadline, %v away: %w",
		ErrWaitExceedsDeadline, delay, cost, max(left, 0), context.DeadlineExceeded)
}
