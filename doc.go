// Package keyrate is per-key rate limiting for latency-critical Go code: one
// call, Allow(key), answers "may this client's request proceed right now?"
// in tens of nanoseconds, allocates nothing for a known key, needs no
// goroutine per key, and never admits more than the limit, however many
// goroutines hit the same key at once.
//
// This package holds the contract: Limit, Policy, Decision, the Limiter
// interfaces, the errors and the options every store shares. The
// arithmetic behind it (for one limit, and for a Policy of several) is
// written once, in an internal package of this module, and the stores
// live in sibling packages and differ only in how they synchronise it:
//
//   - mutexbucket: a map of buckets, each with its own mutex;
//   - striped: N hash-selected stripes, each a mutex and a pointer-free
//     hash table;
//   - atomicbucket: a pointer-free table of 64-bit words, each updated by
//     a lock-free CAS loop.
//
// Because the arithmetic is shared, the three make identical decisions;
// redisbucket runs the same arithmetic in a Redis script. The packed state,
// its arithmetic and the plumbing of options are internal to this module:
// the stores here are the implementations of Limiter, and no store outside
// it is meant to be written.
//
// # The algorithm
//
// Each key has a token bucket of capacity Limit.Burst that gains Limit.Rate
// tokens every Limit.Per. A new key starts full. Refill is lazy: nothing
// happens between calls. Over any interval of length T a key is allowed at
// most Burst + Rate·T/Per tokens in total.
//
// # Algorithms
//
// A Limit counts with the token bucket by default. Limit.Using picks a
// window algorithm instead (see Algorithm): FixedWindow (at most N per
// aligned window of length W; up to 2N across a boundary) or SlidingWindow
// (the sliding-window counter, which weighs the previous window's count by
// how much of it the last W still covers: under 2N in any W, and exactly
// at most N when requests were spread evenly). Both pack into the same
// 64-bit state, so every store carries them, and a policy may mix them
// with token buckets. Their "tokens" are what the window has left: a
// Decision's Remaining is the largest cost allowed now, RetryAfter the
// earliest time the same request is allowed, ResetAfter the time until
// the windows count nothing that still weighs.
//
// SlidingLog, the sliding-window log, is exact: at most N in any interval
// of length W. It keeps each key's admissions of the last W (up to N
// entries), which no 64-bit word holds: mutexbucket and striped carry it
// beside the key's state, atomicbucket refuses it with
// ErrUnsupportedAlgorithm, and a policy with a SlidingLog limit has no
// other window.
//
// # Policies
//
// A Policy is a name and up to MaxLimits limits (windows) enforced all or
// nothing, or Unlimited. A store enforces the Limit given to New as its
// default policy (DefaultPolicy) and, with WithPolicies, named ones: every
// in-process store implements PolicyLimiter, whose Tier and AllowTier pick
// a policy per request, and WithPolicyFunc picks one per key. SetPolicy
// changes policies at runtime and Refund gives tokens back. A key has one
// bucket, one 64-bit state per window of the policy it was last decided
// under; a request is one all-or-nothing transition over them, and a
// change of policy carries them over by the rule PolicyLimiter documents.
// AllowAll decides one request against several keys (a user and its
// organisation, each under its own tier), all or nothing.
//
// # Waiting
//
// Every in-process store implements WaitLimiter: Wait spends a cost once
// the bucket holds it, sleeping on the store's clock if it must, and
// Reserve hands out the earliest slot at which the cost is there, up to a
// maximum wait, without sleeping. A reservation is a spend allowed past
// the fill time by at most that wait; the token bucket's
// bound holds at the reservations' slots, and Wait never returns before
// its slot. Reservation.Cancel gives back the tokens of the latest
// reservation on a key, and never any that a later reservation's slot
// stands behind.
//
// # The packed state
//
// For the token bucket, a bucket is one 64-bit word holding its
// theoretical arrival time (TAT, as in the generic cell rate algorithm):
// the instant, in ticks, at which the bucket will next be full. Tokens and timestamp are folded into
// that one number. With I the ticks per token and F = Burst·I the ticks to
// fill an empty bucket, the bucket at tick now holds
//
//	tokens(now) = (F − max(0, TAT − now)) / I
//
// so TAT ≤ now is a full bucket (a zero word is full at every instant),
// and TAT = now + F is an empty one. Spending c tokens at tick now is
//
//	TAT' = max(TAT, now) + c·I,   allowed iff TAT' − now ≤ F
//
// and a denied request leaves the word unchanged. Every store runs exactly
// this transition, a pure function written once, under a lock or in a CAS
// loop.
//
// # Time unit and exactness
//
// A tick is 1/k ns, where k (the limit's scale) is the denominator of Per/Rate in
// lowest terms whenever that is at most MaxScale (14). Then I = k·Per/Rate
// is a whole number and every decision equals that of the exact rational
// token bucket, with no drift: PerMinute(3) admits 3, then one every 20s
// forever; 3 per 10s (k = 3) is exact too. For other limits k is the least
// value for which rounding I up to a whole tick loses at most 0.01% of the
// rate; the rounding is against the client, never for it. A limit for
// which no k up to 14 loses that little is rejected with ErrInvalidLimit:
// every token interval of at least 10 000/14 ns (about 714ns) has one, and
// a shorter interval only if its fraction of a tick rounds up by little.
//
// # Bounds, and why nothing wraps
//
// A store's clock reading is taken relative to the store's creation (its
// epoch) and clamped to [0, 2^62] ticks; the fill time F is at most 2^62
// ticks, or the limit is rejected with ErrInvalidLimit naming the largest
// Burst it allows. So a TAT never exceeds 2^63 and no sum of a TAT and a
// spend can overflow 64 bits. The clock range is 2^62/k ns after the
// epoch: 146 years at k = 1, over 10 years at k = 14. Past that range time
// stops, which can only deny. Because the word stores an absolute instant
// rather than a time modulo some period, a key idle for any length of time
// within that range comes back full: there is no wrap-around. Burst is
// bounded only by the fill time: a million tokens at one per second is
// under 12 days, far within it.
//
// # Memory
//
// The in-process stores implement BoundedLimiter: they remove the buckets
// of idle keys by themselves, exactly — only buckets that are full again,
// which a new key would get anyway — so eviction never changes a decision.
// WithMaxKeys caps the keys a store tracks (failing closed with
// ErrStoreFull for a new key when none can be evicted), WithSweepInterval
// adds a background sweeper (stopped by Close), and WithHashedKeys keeps a
// seeded 64-bit hash instead of each key. Eviction does not keep the
// packed state from wrapping: nothing wraps within the clock range, swept
// or not.
//
// # Metrics
//
// WithObserver makes a store tell an Observer of every decision (an
// Event: key, policy, cost, allowed or not, the error of a call that
// failed), on the deciding goroutine and outside any lock; without one a
// store pays a nil check per call. The keyrateprom module is an Observer
// that exports Prometheus metrics, keyrateotel one that reports them as
// OpenTelemetry instruments, and httplimit and grpclimit take one too,
// adding shadow-mode denials and requests without a key.
//
// # Time never mints tokens
//
// Take never moves TAT backwards. A goroutine holding a stale reading of
// now (it read the clock, then lost a race) sees a larger max(0, TAT − now)
// and so fewer tokens, never more; a clock stepped backwards likewise only
// denies more until it catches up. One exception, which only a clock that
// steps back can reach (clock.System and clock.NewCoarse never do; a clock
// given to WithClock might): a key's state is carried to a changed policy
// at the reading of the request that finds the change (see PolicyLimiter),
// and carried at a reading earlier than the key's last spend, its spent
// tokens are counted from that reading; under a faster new rate they are
// then repaid early, so the key can get up to its new Burst more at each
// such change.
// The stores take that reading once the old state can no longer change, so
// a goroutine holding a stale reading of a monotonic clock cannot do this.
//
// A window algorithm's state packs the window index above its counts
// (the current window's and the previous one's), each count in
// bits.Len(N) bits, below 2^63 like a TAT. The fixed window decides by
// the current count alone and keeps the previous one for a move to
// another limit, which carries both (as the sliding window's estimate:
// see PolicyLimiter). The index only grows and a window's counts only
// grow, so a stale reading can only spend less: a reading from an earlier
// window than the state's spends nothing. A window rule's clock range
// must be at least ten years, which bounds N for short windows (a window
// of 1s counts up to 131071, one of 1m up to 1048575, one of 24h up to
// 33554431; Limit.Validate names the bound).
package keyrate
