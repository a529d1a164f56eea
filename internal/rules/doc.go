// Package rules is the arithmetic every keyrate store shares, written
// once: a Limit compiled for one packed 64-bit State (Rule: the token
// bucket as GCRA's theoretical arrival time, and the fixed and sliding
// windows), a Policy compiled for one State per window (Rules: the
// all-or-nothing transition, reservations, refunds and the carrying of a
// key's state across a change of policy), a store's set of policies
// (Policies, which resolves a keyrate.Tier), and the making and reading of
// keyrate.Reservations.
//
// It is internal: the stores of this module (in-process and redisbucket)
// are its only users, and keyrate's package documentation describes what
// it computes in words. It imports keyrate for the contract's types;
// keyrate reaches it only through internal/handle.
package rules
