package rules

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// Rules is a Policy compiled for the packed State: one Rule per window,
// sharing one clock and epoch, and the all-or-nothing transition over a
// key's states, one per window. It is what a store enforces; stores differ
// only in how they synchronise calls to its methods on one key's states.
//
// A store compiles each version of each policy once (a change at runtime
// compiles a new Rules), so a key's bucket records the *Rules its states
// were written under and can tell when its policy changed. A Rules is
// immutable and safe for concurrent use.
type Rules struct {
	policy    keyrate.Policy
	rules     []Rule
	minBurst  int
	oneBucket bool
	buckets   bool // several windows, all token buckets: Buckets
	log       bool // one SlidingLog window: see log.go
	words     int  // the states of a key: Len
	clock     clock.Clock
}

// NewRules compiles p for clock c (clock.System() if nil), with the
// epoch, tick 0, at c's reading now. It returns an error wrapping
// ErrInvalidPolicy if p is out of range.
func NewRules(p keyrate.Policy, c clock.Clock) (*Rules, error) {
	if c == nil {
		c = clock.System()
	}
	return compileRules(p, c, c.Now())
}

// compileRules compiles p for clock c with the given epoch.
func compileRules(p keyrate.Policy, c clock.Clock, epoch time.Duration) (*Rules, error) {
	rs, err := compilePolicy(p)
	if err != nil {
		return nil, err
	}
	rs.clock = c
	for i := range rs.rules {
		rs.rules[i].clock, rs.rules[i].epoch = c, epoch
	}
	return rs, nil
}

// Name returns the policy's name.
func (rs *Rules) Name() string { return rs.policy.Name }

// Policy returns the policy rs enforces (a copy).
func (rs *Rules) Policy() keyrate.Policy {
	p := rs.policy
	p.Limits = append([]keyrate.Limit(nil), p.Limits...)
	return p
}

// Unlimited reports whether the policy admits every request; it then has
// no windows.
func (rs *Rules) Unlimited() bool { return rs.policy.Unlimited }

// Len returns the number of states of a key, the length of the state
// slices the other methods take: one per window, or LogWords for a
// SlidingLog policy (IsLog), whose one window has a Log beside them.
func (rs *Rules) Len() int { return rs.words }

// FullStates fills s, Len states, with those of a full bucket (a new key)
// at reading t: each window's FullState.
func (rs *Rules) FullStates(t time.Duration, s []State) {
	if rs.log {
		r := &rs.rules[0]
		r.logFullStates(r.Ticks(t), s)
		return
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		s[i] = r.FullState(r.Ticks(t))
	}
}

// OneBucket reports whether the policy is one token-bucket window: the
// case a store may decide with Rule(0).ReserveBucket, the inlined
// single-limit arithmetic, on its hot path.
func (rs *Rules) OneBucket() bool { return rs.oneBucket }

// Rule returns window i's rule. Stores call it for a one-window policy's
// fast path, which is exactly the single-limit arithmetic.
func (rs *Rules) Rule(i int) *Rule { return &rs.rules[i] }

// Clock returns the clock the rules read: the store's.
func (rs *Rules) Clock() clock.Clock { return rs.clock }

// Now reads the clock, for the methods that take a reading t. An
// unlimited policy decides nothing by it, but its reservations are made
// at a reading (keyrate.Reservation.At), so it reads the store's clock
// too.
func (rs *Rules) Now() time.Duration { return rs.clock.Now() }

// CheckCost returns nil if cost can ever be allowed under the policy, and
// otherwise an error wrapping ErrInvalidCost (cost below 1) or
// ErrCostExceedsBurst (cost above the smallest Burst of its windows).
func (rs *Rules) CheckCost(cost int) error {
	if cost < 1 {
		return fmt.Errorf("%w: cost %d is below 1", keyrate.ErrInvalidCost, cost)
	}
	if cost > rs.minBurst && !rs.policy.Unlimited {
		if len(rs.rules) == 1 {
			return fmt.Errorf("%w: cost %d is above the burst of %d", keyrate.ErrCostExceedsBurst, cost, rs.minBurst)
		}
		return fmt.Errorf("%w: cost %d is above the burst of %d of policy %q's smallest window", keyrate.ErrCostExceedsBurst, cost, rs.minBurst, rs.policy.Name)
	}
	return nil
}

// Take is the all-or-nothing transition: it spends cost tokens from every
// window's state in s (one per window) at clock reading t if every window
// holds them, updating s and returning -1, or returns the index of the
// first window that does not, leaving s unchanged. It is pure, and never
// moves a state backwards. cost must satisfy CheckCost.
//
// A SlidingLog policy's Take reads and writes its summary alone (see
// log.go), and writes it on a deny too, with nothing more counted.
func (rs *Rules) Take(s []State, t time.Duration, cost int) (denied int) {
	if rs.log {
		r := &rs.rules[0]
		if r.logTake(s, r.Ticks(t), cost) {
			return -1
		}
		return 0
	}
	var next [keyrate.MaxLimits]State
	ws := rs.rules
	s = s[:len(ws)]
	for i := range ws {
		r := &ws[i]
		now := r.Ticks(t)
		var n State
		var ok bool
		if r.alg == keyrate.TokenBucket {
			// Take's arithmetic, inlined: ReserveBucket with no wait is
			// Take for a reading within the clock range, as Ticks gives.
			n, ok = r.ReserveBucket(s[i], now, cost, 0)
		} else {
			n, ok = r.wTake(s[i], now, cost)
		}
		if !ok {
			return i
		}
		next[i] = n
	}
	for i := range s { // a copy of at most MaxLimits states, with no call
		s[i] = next[i]
	}
	return -1
}

// Refund gives cost tokens back to every window's state in s at clock
// reading t, each capped at its Burst (see Rule.Refund). If any window
// owes more than its Burst (a reservation's slot lies ahead), no window
// gains anything.
func (rs *Rules) Refund(s []State, t time.Duration, cost int) {
	if rs.log {
		r := &rs.rules[0]
		r.logRefund(s, r.Ticks(t), cost)
		return
	}
	if rs.pending(s, t) {
		return
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		s[i] = r.Refund(s[i], r.Ticks(t), cost)
	}
}

// Full reports whether every window's state in s is full at reading t:
// the key is then indistinguishable from a new one.
func (rs *Rules) Full(s []State, t time.Duration) bool {
	if rs.log { // as a new key's: empty, and its clock not ahead
		r := &rs.rules[0]
		return uint64(s[2]) <= r.Ticks(t)
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		if !r.Full(s[i], r.Ticks(t)) {
			return false
		}
	}
	return true
}

// Reading returns the earliest clock reading at which every window's
// state in s is full (see Rule.Reading).
func (rs *Rules) Reading(s []State) time.Duration {
	if rs.log {
		return rs.rules[0].reading(uint64(s[2]))
	}
	var t time.Duration = math.MinInt64
	for i := range rs.rules {
		t = max(t, rs.rules[i].Reading(s[i]))
	}
	return t
}

// Decide builds the Decision for a request of cost at clock reading t,
// given the states s after it (the new states when allowed, the unchanged
// ones when denied) and Take's result.
func (rs *Rules) Decide(s []State, t time.Duration, cost int, denied int) keyrate.Decision {
	if rs.policy.Unlimited {
		return rs.UnlimitedDecision()
	}
	if len(rs.rules) == 1 {
		r := &rs.rules[0]
		if rs.log {
			return r.logDecide(s, r.Ticks(t), cost, denied < 0)
		}
		return r.Decide(s[0], r.Ticks(t), cost, denied < 0)
	}
	d := keyrate.Decision{Allowed: denied < 0, Policy: rs.policy.Name, Window: -1}
	for i := range rs.rules {
		r := &rs.rules[i]
		now := r.Ticks(t)
		rem, reset := r.Tokens(s[i], now), r.resetAt(s[i], now)
		d.ResetAfter = max(d.ResetAfter, reset)
		if !d.Allowed {
			d.RetryAfter = max(d.RetryAfter, r.retryAt(s[i], now, cost))
		}
		// The window with the fewest tokens: on a denial, one that
		// denied (a window that denied holds less than the cost, and
		// this one no more than it).
		if d.Window < 0 || rem < d.Remaining {
			d.Window, d.WindowResetAfter, d.Remaining = i, reset, rem
		}
	}
	d.Limit = rs.policy.Limits[d.Window]
	return d
}

// Peek reports what a cost-1 request would get from the states s at clock
// reading t, spending nothing.
func (rs *Rules) Peek(s []State, t time.Duration) keyrate.Decision {
	if rs.policy.Unlimited {
		return rs.UnlimitedDecision()
	}
	if rs.log {
		r := &rs.rules[0]
		now := r.Ticks(t)
		_, used, _ := r.logView(s, now)
		return r.logDecide(s, now, 1, used+1 <= r.n)
	}
	denied := -1
	for i := range rs.rules {
		r := &rs.rules[i]
		if _, ok := r.Take(s[i], r.Ticks(t), 1); !ok {
			denied = i
			break
		}
	}
	return rs.Decide(s, t, 1, denied)
}

// UnlimitedDecision is the Decision of an unlimited policy: allowed, with
// math.MaxInt tokens remaining and no limit.
func (rs *Rules) UnlimitedDecision() keyrate.Decision {
	return keyrate.Decision{Allowed: true, Policy: rs.policy.Name, Remaining: math.MaxInt}
}

// compilePolicy validates p and compiles its windows, reading no clock.
func compilePolicy(p keyrate.Policy) (*Rules, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Unlimited {
		return &Rules{policy: keyrate.Policy{Name: p.Name, Unlimited: true}}, nil
	}
	rs := &Rules{policy: keyrate.Policy{Name: p.Name, Limits: slices.Clone(p.Limits)}, rules: make([]Rule, len(p.Limits))}
	rs.minBurst = p.Limits[0].Burst
	for i, l := range p.Limits {
		r, err := compile(l)
		if err != nil {
			return nil, err // not reached: Validate compiled every window
		}
		r.policy, r.window = p.Name, i
		rs.rules[i] = r
		rs.minBurst = min(rs.minBurst, l.Burst)
	}
	rs.oneBucket = len(rs.rules) == 1 && rs.rules[0].alg == keyrate.TokenBucket
	rs.buckets = len(rs.rules) > 1
	for _, r := range rs.rules {
		rs.buckets = rs.buckets && r.alg == keyrate.TokenBucket
	}
	rs.log = rs.rules[0].alg == keyrate.SlidingLog
	rs.words = len(rs.rules)
	if rs.log {
		rs.words = LogWords
	}
	return rs, nil
}
