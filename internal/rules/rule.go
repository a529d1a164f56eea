package rules

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/tick"
)

// maxTicks bounds both a store's clock reading and a bucket's fill time,
// in ticks, so that a theoretical arrival time (at most their sum) fits in
// 63 bits and no addition can wrap.
const maxTicks = tick.MaxTicks

// State is one bucket's packed 64-bit state: its theoretical arrival time
// (TAT), the tick at which the bucket will next be full. The zero State is a
// full bucket. See the package documentation for how it encodes the tokens
// and the timestamp.
type State uint64

// Tombstone is the State of a bucket that a sweep has removed: a value no
// live bucket can hold, since a theoretical arrival time never exceeds
// 2^63 (see the package documentation). A store marks a bucket Tombstone,
// under the bucket's lock or with one compare-and-swap, in the same step
// in which it finds the bucket full, so that a goroutine that looked the
// bucket up just before it was removed sees the mark and looks the key up
// again instead of spending from the detached bucket.
//
// Tombstone is not a state to pass to Take: check for it first.
const Tombstone State = ^State(0)

// Rule is a Limit compiled for the packed State, together with the clock
// it reads: the token-bucket arithmetic that every keyrate store shares.
// Stores differ only in how they synchronise calls to Take on one State.
//
// A Rule is immutable after NewRule and safe for concurrent use.
type Rule struct {
	limit    keyrate.Limit
	alg      keyrate.Algorithm
	policy   string // the name of the policy the rule is a window of
	window   int    // the rule's index in that policy's Limits
	scale    uint64 // ticks per nanosecond
	interval uint64 // ticks per token: Per·scale/Rate, exact or rounded up
	fill     uint64 // ticks to fill an empty bucket: Burst·interval
	exact    bool
	clock    clock.Clock
	epoch    time.Duration
	maxNanos time.Duration // clock readings past epoch+maxNanos saturate
	// A window rule's window (W ticks), limit (N) and count bits: see
	// window.go.
	win uint64
	n   uint64
	cb  uint8
}

// NewRule compiles l for clock c (clock.System() if c is nil). The
// rule's epoch, tick 0, is c's reading now. Its decisions name the policy
// DefaultPolicy. It returns an error wrapping
// ErrInvalidLimit if l is out of range.
func NewRule(l keyrate.Limit, c clock.Clock) (Rule, error) {
	p, err := compile(l)
	if err != nil {
		return Rule{}, err
	}
	if c == nil {
		c = clock.System()
	}
	p.clock = c
	p.epoch = c.Now()
	p.policy = keyrate.DefaultPolicy
	return p, nil
}

// compile validates l and works out its tick unit. It reads no clock.
func compile(l keyrate.Limit) (Rule, error) {
	u, err := tick.Compile(tick.Spec{Rate: l.Rate, Per: l.Per, Burst: l.Burst, Alg: uint8(l.Algorithm), Name: l.Algorithm.String()})
	if err != nil {
		return Rule{}, fmt.Errorf("%w: %v", keyrate.ErrInvalidLimit, err)
	}
	return Rule{limit: l, alg: l.Algorithm, scale: u.Scale, interval: u.Interval, fill: u.Fill, exact: u.Exact,
		maxNanos: u.MaxNanos, win: u.Win, n: u.N, cb: u.CB}, nil
}

// Limit returns the limit the rule enforces.
func (p *Rule) Limit() keyrate.Limit { return p.limit }

// Exact reports whether the rule's decisions equal those of the exact
// rational token bucket. It is true whenever Per/Rate, reduced to lowest
// terms, has a denominator of at most MaxScale (every limit whose token
// interval is a whole number of nanoseconds, and 3 per 10s too). Otherwise
// the interval is rounded up, losing less than 0.01% of the rate.
func (p *Rule) Exact() bool { return p.exact }

// Range returns the rule's clock range: readings up to Range after the
// epoch are exact; later ones saturate there, so time stops rather than
// wraps. It is 2^62/Scale ns: 146 years at one tick per nanosecond.
func (p *Rule) Range() time.Duration { return p.maxNanos }

// Scale returns the rule's ticks per nanosecond.
func (p *Rule) Scale() uint64 { return p.scale }

// Now reads the rule's clock and returns the time since the epoch in
// ticks. A reading before the epoch counts as tick 0; one more than the
// clock range after it saturates, so that time stops rather than wraps.
func (p *Rule) Now() uint64 { return p.Ticks(p.clock.Now()) }

// Ticks converts a reading t of the rule's clock to ticks since the
// epoch, as Now does.
func (p *Rule) Ticks(t time.Duration) uint64 {
	if t <= p.epoch {
		return 0
	}
	// t > epoch, so t-epoch is below 2^64 and exact as a uint64 (as an
	// int64 it could overflow); maxNanos is at most 2^62.
	return min(uint64(t)-uint64(p.epoch), uint64(p.maxNanos)) * p.scale
}

// Algorithm returns the rule's algorithm.
func (p *Rule) Algorithm() keyrate.Algorithm { return p.alg }

// Reading returns the earliest reading of the rule's clock at which the
// bucket in state s is full, rounded up to a whole nanosecond (and
// saturating at the longest time.Duration). A store keeps its floor (the
// latest instant any evicted bucket was full at) as a reading, so that
// rules of different scales can share it.
func (p *Rule) Reading(s State) time.Duration {
	if p.alg != keyrate.TokenBucket {
		return p.reading(p.wFullAt(s))
	}
	return p.reading(uint64(s))
}

// FullState returns the state of a full bucket (a new key) at tick now:
// one from which a reading of now or later spends as from the zero State,
// and an earlier reading gets no more. Stores start a key that may have
// been evicted at the floor's FullState (see sweep.Floor).
func (p *Rule) FullState(now uint64) State {
	if p.alg != keyrate.TokenBucket {
		return p.pack(now/p.win, 0, 0)
	}
	return State(now)
}

// reading converts a tick to the earliest reading of the rule's clock at
// or after it, rounded up to a whole nanosecond (and saturating at the
// longest time.Duration): the inverse of Ticks.
func (p *Rule) reading(ticks uint64) time.Duration {
	ns := (ticks + p.scale - 1) / p.scale
	if ns > uint64(math.MaxInt64-max(p.epoch, 0)) {
		return math.MaxInt64
	}
	return p.epoch + time.Duration(ns)
}

// CheckCost returns nil if cost can ever be allowed under the rule, and
// otherwise an error wrapping ErrInvalidCost or ErrCostExceedsBurst.
func (p *Rule) CheckCost(cost int) error {
	if cost < 1 {
		return fmt.Errorf("%w: cost %d is below 1", keyrate.ErrInvalidCost, cost)
	}
	if cost > p.limit.Burst {
		return fmt.Errorf("%w: cost %d is above the burst of %d", keyrate.ErrCostExceedsBurst, cost, p.limit.Burst)
	}
	return nil
}

// Take is the token-bucket transition: it spends cost tokens from state s
// at tick now, returning the new state and true, or s and false if the
// bucket holds fewer than cost tokens. It is pure: it reads no clock and
// changes nothing. cost must satisfy CheckCost.
//
// The new state never precedes s, so a stale reading of now (taken before
// another goroutine's update) can only find fewer tokens, never more.
func (p *Rule) Take(s State, now uint64, cost int) (State, bool) {
	if p.alg != keyrate.TokenBucket {
		return p.wTake(s, now, cost)
	}
	next := max(uint64(s), now) + uint64(cost)*p.interval
	if next-now > p.fill {
		return s, false
	}
	return State(next), true
}

// Refund gives cost tokens back to the bucket in state s at tick now and
// returns the new state: the bucket then holds cost more tokens, or Burst
// if that is fewer. It is exact: a spend of cost followed by a refund of
// cost, with nothing in between, leaves the bucket holding what it held
// before (or a full bucket, which is the same). cost must be at least 1.
//
// A refund moves the state back by at most cost tokens' worth and never
// below now, so a refund made with a stale reading of now gives back at
// most cost tokens too.
//
// A bucket that owes more than Burst (its state is more than the fill time
// ahead of now) gains nothing: its tokens up to that state are promised to
// reservations whose slots have not come (Reserve), or owed from a change
// to a smaller limit (Carry), and giving any back would let a new request
// share a reserved slot.
func (p *Rule) Refund(s State, now uint64, cost int) State {
	if p.alg != keyrate.TokenBucket {
		return p.wRefund(s, now, cost)
	}
	if p.pending(s, now) {
		return s
	}
	debt := p.debt(s, now)
	hi, back := bits.Mul64(uint64(cost), p.interval)
	if hi != 0 || back >= debt {
		return State(min(uint64(s), now)) // full
	}
	return s - State(back)
}

// Debt returns the tokens the bucket in state s lacks at tick now (spent
// and not yet refilled), as a fraction num/den: num is the debt in ticks
// and den the ticks per token. Rules.Carry uses it to carry a bucket's
// state over to another rule.
//
// A window rule's debt is the cost counted against it at now, whole: the
// count of now's window plus the previous window's weighted by the part
// of now's window still to come (the sliding window's estimate, for the
// fixed window too, and not capped at N), plus what it counts in later
// windows (see wDebt).
func (p *Rule) Debt(s State, now uint64) (num, den uint64) {
	if p.alg != keyrate.TokenBucket {
		return p.wDebt(s, now), 1
	}
	return p.debt(s, now), p.interval
}

// Carry returns the state, under p at tick now, of a bucket that lacks
// num/den tokens (from Debt under another rule), counted as spent at now:
// the debt in of Rules.Carry. The tokens spent and not yet refilled carry
// over whole, rounded up (against the client), and refill at p's rate:
// the bucket holds Burst − num/den tokens of p, and none (owing the rest)
// if that is negative. A full bucket stays full, as a new one would be,
// and a bucket full under one rule is full under every other, so eviction
// and carrying agree. The debt is capped at 2^62 ticks, so that the state
// stays within its bounds.
//
// A window rule counts the debt from now's window, N to a window, the
// rest spilling into the windows after it (wCarry).
func (p *Rule) Carry(num, den uint64, now uint64) State {
	if p.alg != keyrate.TokenBucket {
		return p.wCarry(num, den, now)
	}
	if num == 0 {
		return State(now)
	}
	hi, lo := bits.Mul64(num, p.interval)
	if hi >= den {
		return State(now + maxTicks)
	}
	q, r := bits.Div64(hi, lo, den)
	if r != 0 {
		q++
	}
	return State(now + min(q, maxTicks))
}

// Encode returns the state of a bucket holding tokens tokens at tick now,
// clamped to [0, Burst]. It is the inverse of Tokens.
func (p *Rule) Encode(tokens int, now uint64) State {
	tokens = min(max(tokens, 0), p.limit.Burst)
	if p.alg != keyrate.TokenBucket {
		return p.pack(now/p.win, 0, uint64(p.limit.Burst-tokens))
	}
	return State(now + uint64(p.limit.Burst-tokens)*p.interval)
}

// Tokens returns the whole tokens in the bucket in state s at tick now.
func (p *Rule) Tokens(s State, now uint64) int {
	if p.alg != keyrate.TokenBucket {
		return p.wRemaining(s, now)
	}
	return p.remaining(p.debt(s, now))
}

// Full reports whether the bucket in state s is full at tick now: it is
// then indistinguishable from a new bucket.
func (p *Rule) Full(s State, now uint64) bool {
	if p.alg != keyrate.TokenBucket {
		return p.wFullAt(s) <= now
	}
	return uint64(s) <= now
}

// Decide builds the Decision for a request of cost at tick now, given the
// bucket's state s after it (the new state when allowed, the unchanged one
// when denied).
func (p *Rule) Decide(s State, now uint64, cost int, allowed bool) keyrate.Decision {
	if p.alg != keyrate.TokenBucket {
		return p.wDecide(s, now, cost, allowed)
	}
	debt := p.debt(s, now)
	reset := p.duration(debt)
	d := keyrate.Decision{
		Allowed:          allowed,
		Policy:           p.policy,
		Window:           p.window,
		Limit:            p.limit,
		Remaining:        p.remaining(debt),
		ResetAfter:       reset,
		WindowResetAfter: reset,
	}
	if !allowed {
		d.RetryAfter = p.duration(debt + uint64(cost)*p.interval - p.fill)
	}
	return d
}

// Peek reports what a cost-1 request would get from state s at tick now,
// spending nothing.
func (p *Rule) Peek(s State, now uint64) keyrate.Decision {
	if p.alg != keyrate.TokenBucket {
		_, ok := p.wTake(s, now, 1)
		return p.wDecide(s, now, 1, ok)
	}
	debt := p.debt(s, now)
	reset := p.duration(debt)
	d := keyrate.Decision{
		Allowed:          debt+p.interval <= p.fill,
		Policy:           p.policy,
		Window:           p.window,
		Limit:            p.limit,
		Remaining:        p.remaining(debt),
		ResetAfter:       reset,
		WindowResetAfter: reset,
	}
	if !d.Allowed {
		d.RetryAfter = p.duration(debt + p.interval - p.fill)
	}
	return d
}

// resetAt returns the time from tick now until state s is full.
func (p *Rule) resetAt(s State, now uint64) time.Duration {
	if p.alg != keyrate.TokenBucket {
		return p.duration(sub0(p.wResetAt(s), now))
	}
	return p.duration(p.debt(s, now))
}

// retryAt returns the time from tick now until a request of cost is
// allowed from state s if nothing else spends: 0 if it is now.
func (p *Rule) retryAt(s State, now uint64, cost int) time.Duration {
	if p.alg != keyrate.TokenBucket {
		slot, _, _, _ := p.earliest(s, now, uint64(cost))
		return p.duration(sub0(slot, now))
	}
	if need := p.debt(s, now) + uint64(cost)*p.interval; need > p.fill {
		return p.duration(need - p.fill)
	}
	return 0
}

// wDecide is Decide for a window rule.
func (p *Rule) wDecide(s State, now uint64, cost int, allowed bool) keyrate.Decision {
	reset := p.resetAt(s, now)
	d := keyrate.Decision{
		Allowed:          allowed,
		Policy:           p.policy,
		Window:           p.window,
		Limit:            p.limit,
		Remaining:        p.wRemaining(s, now),
		ResetAfter:       reset,
		WindowResetAfter: reset,
	}
	if !allowed {
		d.RetryAfter = p.retryAt(s, now, cost)
	}
	return d
}

// sub0 returns a − b, or 0 if b ≥ a.
func sub0(a, b uint64) uint64 {
	if a <= b {
		return 0
	}
	return a - b
}

// debt returns the ticks until the bucket in state s is full: 0 if it is.
func (p *Rule) debt(s State, now uint64) uint64 {
	if uint64(s) <= now {
		return 0
	}
	return uint64(s) - now
}

// remaining returns the whole tokens in a bucket with the given debt. The
// debt exceeds the fill time only after the clock went backwards.
func (p *Rule) remaining(debt uint64) int {
	if debt >= p.fill {
		return 0
	}
	return int((p.fill - debt) / p.interval)
}

// duration converts ticks to a duration, rounding up, and saturating at
// the longest time.Duration: a debt of up to 2^63 ticks (a bucket emptied
// at the end of the clock range, read with the clock set back to its
// epoch) is longer than a time.Duration can hold at one tick per
// nanosecond, and must not wrap to a negative one.
func (p *Rule) duration(ticks uint64) time.Duration {
	ns := (ticks + p.scale - 1) / p.scale
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
