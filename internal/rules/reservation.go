package rules

import (
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
	reservationParts = handle.ReservationParts.(func(keyrate.Reservation) (rules any, end uint64))
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
	rules, _ := reservationParts(r)
	rs, _ := rules.(*Rules)
	return rs
}

// ReservationEnd returns the state r left in window 0. Stores call it in
// Cancel.
func ReservationEnd(r keyrate.Reservation) State {
	_, end := reservationParts(r)
	return State(end)
}
