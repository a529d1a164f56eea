// Package handle is the crossing between the handles package keyrate
// gives its users (Tier, Reservation) and internal/rules, which makes and
// reads them: keyrate cannot import internal/rules, which imports keyrate.
//
// A Tier is read on every request that carries one, so it crosses at no
// cost: keyrate.Tier has the layout of Tier, and internal/rules converts
// one into the other (a test there checks the layouts agree). A
// Reservation crosses only when a store makes one or cancels one, through
// the functions keyrate's init stores here, which internal/rules asserts
// to their types once, at its own initialisation (the pattern grpc-go's
// internal package uses).
package handle

// Slot is what a keyrate.Tier points to: the first field of the slot of
// one named policy in internal/rules, which holds the rest.
type Slot struct {
	Name string // the policy's name
}

// Tier has the layout of keyrate.Tier: one pointer to a Slot.
type Tier struct {
	Slot *Slot
}

// NewReservation is, once keyrate is initialised,
//
//	func(lim interface{ Cancel(keyrate.Reservation) bool }, key string, rules any,
//		end uint64, t, slot, wait time.Duration, cost int, ok bool) keyrate.Reservation
//
// which builds a Reservation from its parts: rules is the *rules.Rules it
// was made under, end the state it left in window 0.
var NewReservation any

// ReservationParts is, once keyrate is initialised,
//
//	func(keyrate.Reservation) (rules any, end uint64, claim *atomic.Bool)
//
// which returns what NewReservation was given as rules and end, and the
// flag its copies share that a Cancel claims (nil for a reservation that
// need not wait).
var ReservationParts any

// Multi is the first parameter of an in-process store's TryAllowAll, the
// method through which keyrate.AllowAll lets the store decide a request
// of several keys itself (internal/multi): a type only this module can
// name, so that the method is plumbing between keyrate and its stores,
// which no other package can call, rather than API.
type Multi struct{}

// PolicyVersion is the parameter of a store's PolicyVersion, the count
// of its policy changes, which httplimit reads to learn that the header
// fields it built for a policy may be stale: a type only this module can
// name, as Multi is.
type PolicyVersion struct{}
