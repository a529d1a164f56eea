package keyrate

// Limiter is a per-key rate limiter: every key has its own token bucket,
// created full on first use, all under one Limit.
//
// Every implementation is safe for concurrent use and never admits more than
// the limit, however many goroutines call it at once on the same key.
type Limiter interface {
	// Allow reports whether one token may be spent for key now, and spends
	// it if so. It is shorthand for AllowN(key, 1) when only the answer is
	// needed; it reports false if AllowN would return an error.
	Allow(key string) bool

	// AllowN spends cost tokens for key if the bucket holds that many, and
	// reports the decision. It returns an error wrapping ErrInvalidCost for
	// cost < 1 and ErrCostExceedsBurst for cost > Burst; a call that returns
	// an error spends nothing and stores nothing.
	AllowN(key string, cost int) (Decision, error)

	// Peek reports the state of key's bucket without spending: Allowed and
	// RetryAfter say what a cost-1 request would get now, Remaining is the
	// whole tokens available now. An unknown key reports a full bucket and
	// is not stored. A key that WithPolicyFunc puts under a policy the
	// store lacks (where AllowN returns ErrUnknownPolicy) reports the zero
	// Decision.
	Peek(key string) Decision

	// Len returns the number of keys the limiter tracks.
	Len() int
}

// PolicyLimiter is a Limiter that enforces a policy per key, chosen per
// request (Tier and AllowTier) or per key (WithPolicyFunc), where each
// policy is one or more limits enforced together (see Policy), and that
// can change its policies and give tokens back at runtime. The in-process
// stores and redisbucket implement it; with none of its options a store
// enforces the single Limit given to New, named DefaultPolicy.
//
// A key has one bucket, whatever its policy: a window per limit of the
// policy it was last decided under. When a key's policy changes (SetPolicy,
// or the key moves to another tier), its next request is decided under the
// new policy, with the key's state carried over at that request (until
// then it refills at its old rates), by one rule: the tokens the key has
// spent and not yet refilled under its old policy are owed whole under the
// new one, counted as spent at that request, and refill at the new rates.
// Windows are matched by length, not position (a window algorithm's Per,
// a token bucket's fill time Burst·Per/Rate): each window of the new
// policy owes the most that any old window of its length owed, or any old
// window whose length the new policy lacks (or, with no old window of its
// length, any old window at all). A client of 100 a minute that has
// spent 60 gets 9 940 tokens at once when upgraded to 10 000 a minute;
// downgraded to 50 a minute, it owes 10 and waits 13.2s for its next
// token. A window algorithm's window owes its current window's count, the
// previous window's weighted by the part of the current window still to
// come, and anything it counts in later windows; a log, the cost it holds
// in its window. So no sequence of changes or tier moves hands a key
// tokens it has not refilled under any of its policies, and a limit that
// two policies share keeps its bound across a move between them. The rule,
// its proof obligations and what it costs (it may deny a little more, by
// rounding and where a state no longer holds what it counted) are in
// docs/design/carry.md. Two exceptions remain: a clock that steps back
// across a change (see "Time never mints tokens" in the package
// documentation), and reservations pending when the key's state is
// carried: a reservation keeps its slot, while the new policy counts its
// tokens as spent at the carry and refills them from then, so at the
// slots the key can be admitted up to the pending reservations' cost
// more, once each. (The state cannot tell reserved tokens from spent
// ones; cancel pending reservations before moving a key where that
// matters.)
type PolicyLimiter interface {
	Limiter

	// Tier returns a handle on the policy named name, for AllowTier and
	// RefundTier, or an error wrapping ErrUnknownPolicy that names it.
	// The zero Tier is the default policy.
	Tier(name string) (Tier, error)

	// AllowTier is AllowN under tier's policy (its current version): it
	// spends cost tokens from every window of key's bucket if every window
	// holds them, and from none otherwise. It returns an error wrapping
	// ErrUnknownPolicy for a Tier of another store, ErrInvalidCost for
	// cost < 1 and ErrCostExceedsBurst for a cost above the smallest Burst
	// of the policy's windows. Under an unlimited policy every request is
	// allowed and nothing is stored.
	AllowTier(key string, tier Tier, cost int) (Decision, error)

	// PeekTier is Peek under tier's policy: it reports what a cost-1
	// AllowTier would get now, spending nothing and storing nothing (a
	// key under another policy is carried to tier's only in the answer,
	// as AllowTier would carry it). It returns an error wrapping
	// ErrUnknownPolicy for a Tier of another store.
	PeekTier(key string, tier Tier) (Decision, error)

	// Refund gives cost tokens back to key under key's policy (as AllowN
	// chooses it): every window gains cost tokens, capped at its Burst. It
	// is exact: a refund of what a request spent, made before the bucket
	// refilled, leaves the key as if the request had not been made. A key
	// the store does not track is full and gains nothing. It returns an
	// error wrapping ErrInvalidCost for cost < 1 and ErrCostExceedsBurst
	// for a cost above the smallest Burst (more than one request could
	// have spent). On the in-process stores a Refund, on any key, waits
	// for the AllowAll undos in flight and keeps the AllowAll calls then
	// running from undoing their spends (see AllowAll).
	Refund(key string, cost int) error

	// RefundTier is Refund under tier's policy.
	RefundTier(key string, tier Tier, cost int) error

	// SetPolicy adds p, or replaces the policy of the same name (the
	// default, named DefaultPolicy, included), while requests are in
	// flight: every request that starts after it returns is decided under
	// p, each key's state carried over as the type documentation says. It
	// returns an error wrapping ErrInvalidPolicy, and changes nothing, if
	// p is invalid.
	SetPolicy(p Policy) error

	// Policies returns the policies the limiter enforces now, the default
	// included, in no set order.
	Policies() []Policy
}
