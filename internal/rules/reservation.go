package rules

import (
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/handle"
)

// Canceler is what a Reservation calls back to cancel itself: the store
// that made it. Every WaitLimiter is one.
type Canceler = interface {
	Cancel(r keyrate.Reservation) bool
}

// The crossings into keyrate's Reservation (see internal/handle), asserted
// once: keyrate, which this package imports, has set them by now.
var (
	newReservation   = handle.NewReservation.(func(lim Canceler, key string, rules any, end uint64, t, slot, wait time.Duration, cost int, ok bool) keyrate.Reservation)
	reservationParts = handle.ReservationParts.(func(keyrate.Reservation) (rules any, end uint64, claim *atomic.Bool))
)

// NewReservation is how a store reports a reservation: made by lim for
// key under rs at clock reading t, with maximum wait wait and cost cost,
// with its slot, and (for Cancel) end, the state it left in window 0. ok
// reports whether it was made; if not, slot is the one it would have
// needed. Stores call it; users get Reservations from a WaitLimiter.
func NewReservation(lim Canceler, key string, rs *Rules, end State, t, slot, wait time.Duration, cost int, ok bool) keyrate.Reservation {
	var rules any // nil for a nil rs, as in the zero Reservation
	if rs != nil {
		rules = rs
	}
	return newReservation(lim, key, rules, uint64(end), t, slot, wait, cost, ok)
}

// ReservationRules returns the compiled policy r was made under (nil for
// the zero Reservation). Stores call it in Cancel.
func ReservationRules(r keyrate.Reservation) *Rules {
	rules, _, _ := reservationParts(r)
	rs, _ := rules.(*Rules)
	return rs
}

// ReservationEnd returns the state r left in window 0. Stores call it in
// Cancel.
func ReservationEnd(r keyrate.Reservation) State {
	_, end, _ := reservationParts(r)
	return State(end)
}

// ClaimCancel reports whether a store's cancel of r may go ahead, and if
// so claims it: no cancel of r, of any copy of it, has given its tokens
// back, and none is under way. A store calls it just before it gives the
// tokens back (after the checks that need no claim) and, unless it gave
// them back, UnclaimCancel after; CancelOnce does both. Without it a
// second Cancel of r, made after a later reservation of the same cost had
// taken the slot r's first Cancel freed, would find the key's bucket in
// the state r left, and give back the later reservation's tokens while
// its holder still proceeds at its slot. A reservation that need not wait
// has no claim: ClaimCancel lets its cancel go ahead, which gives nothing
// back.
func ClaimCancel(r keyrate.Reservation) bool {
	_, _, claim := reservationParts(r)
	return claim == nil || claim.CompareAndSwap(false, true)
}

// UnclaimCancel undoes ClaimCancel after a cancel of r that certainly gave
// nothing back (the key's bucket had changed), so that r can be cancelled
// when it is the latest reservation again. After a cancel whose outcome is
// unknown (Redis did not answer) r stays claimed: its tokens then stay
// spent, which never admits more than the limit.
func UnclaimCancel(r keyrate.Reservation) {
	if _, _, claim := reservationParts(r); claim != nil {
		claim.Store(false)
	}
}

// CancelOnce is a store's Cancel of r. It returns false, running
// nothing, for a reservation no store gives anything back for (the zero
// Reservation, one not OK, one under an unlimited policy) or one that
// ClaimCancel refuses; otherwise it returns what cancel, given r's
// compiled policy, returns: the store's cancel, which either gives r's
// tokens back or certainly gives nothing. r stays claimed if it gave them
// back.
func CancelOnce(r keyrate.Reservation, cancel func(rs *Rules) bool) bool {
	rs := ReservationRules(r)
	if rs == nil || !r.OK() || rs.Unlimited() || !ClaimCancel(r) {
		return false
	}
	if cancel(rs) {
		return true
	}
	UnclaimCancel(r)
	return false
}
