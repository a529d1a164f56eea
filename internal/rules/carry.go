package rules

import (
	"math/bits"
	"time"

	"github.com/keyrate/keyrate"
)

// This file is the carrying of a key's state from one policy to another
// (docs/design/carry.md), written once for every algorithm as three steps:
// debt out of every window of the old policy (Rule.Debt, or a log's cost in
// its window), matched to the windows of the new one by length (owes), and
// debt in, counted as spent at the carry instant (Rule.Carry, or one
// admission of a log). The invariant: the tokens a key has spent and not
// yet refilled under its old policy are owed whole under the new one.

// debt is a number of tokens owed, num/den (den ≥ 1): exact for a token
// bucket, whose debt is a number of ticks over its ticks per token.
type debt struct{ num, den uint64 }

// less reports whether d < e, comparing the fractions in 128 bits.
func (d debt) less(e debt) bool {
	h1, l1 := bits.Mul64(d.num, e.den)
	h2, l2 := bits.Mul64(e.num, d.den)
	return h1 < h2 || (h1 == h2 && l1 < l2)
}

// whole returns d rounded up to a whole token.
func (d debt) whole() uint64 {
	q := d.num / d.den
	if d.num%d.den != 0 {
		q++
	}
	return q
}

// Carry fills into, one state per window of rs (Len of them), with the
// states of a key whose states under rules from were s, for its first
// request under rs at clock reading t: the rule by which a key keeps its
// state when its policy changes (docs/design/carry.md). from and rs must
// share a clock and an epoch (both compiled by one store).
//
//  1. Window i of from owes D_i tokens at t (Rule.Debt; a log, the cost of
//     its admissions still in the window, at the later of t and its
//     clock, from which the carry then counts).
//  2. Window j of rs owes the largest D_i over the windows of from of its
//     length (Rule.length: a token bucket's fill time, a window's Per) and
//     those whose length rs lacks, or over all of them if none has its
//     length.
//  3. Window j holds that debt as spent at t (Rule.Carry; a log, one
//     admission that stays in the window until t + ⌈D/N⌉·W).
//
// A window of the same algorithm and length as a window of from keeps that
// window's counts, if they fit its N and that window's debt is the one it
// owes; a log of the same length as a log keeps its admissions (collapsed
// onto the newest), if their cost fits its N. A key moved between any
// policies thus never holds tokens it had not refilled under either: a
// round trip at one instant gives back nothing, and a limit both policies
// have keeps its bound across the change.
//
// A key's state is carried over at its first request under rs, not when
// rs was compiled: until then it refills at its old rates. (Carrying it
// at the moment of a change would let a sweep that removed a bucket full
// under the old rates change the key's decision.)
func (rs *Rules) Carry(from *Rules, s []State, t time.Duration, into []State) {
	var owed [keyrate.MaxLimits]debt
	at := t // the instant the debts are owed from
	if from.log {
		f := &from.rules[0]
		te, used, full := f.logView(s, f.Ticks(t))
		owed[0], at = debt{used, 1}, max(t, f.reading(te))
		if p := &rs.rules[0]; rs.log && p.win == f.win && used <= p.n {
			p.logSummary(into, te, used, full, 1) // the same window: keep it
			return
		}
	} else {
		for i := range from.rules {
			f := &from.rules[i]
			owed[i].num, owed[i].den = f.Debt(s[i], f.Ticks(t))
		}
	}
	for j := range rs.rules {
		p := &rs.rules[j]
		d, keep := rs.owes(from, owed[:len(from.rules)], j)
		if keep >= 0 { // the same windows: keep their counts as now sees them, if they fit
			f := &from.rules[keep]
			if base, _, prev, cur, _ := f.view(s[keep], f.Ticks(t)); prev <= p.n && cur <= p.n {
				into[j] = p.pack(min(base, p.lastWindow()+2), prev, cur)
				continue
			}
		}
		now := p.Ticks(at)
		switch p.alg {
		case keyrate.TokenBucket:
			into[j] = p.Carry(d.num, d.den, now)
		case keyrate.SlidingLog:
			p.logCarry(d.whole(), now, into)
		default:
			into[j] = p.wCarry(d.num, d.den, now)
		}
	}
}

// owes returns the debt window j of rs owes, given the debts owed of the
// windows of from (step 2 of Carry), and the index of a window of from
// whose counts it may keep as they are, if they fit its N (a window
// algorithm's of the same algorithm and length, whose debt it owes), or
// -1.
func (rs *Rules) owes(from *Rules, owed []debt, j int) (d debt, keep int) {
	p := &rs.rules[j]
	same := false
	for i := range owed {
		same = same || from.rules[i].sameLength(p)
	}
	d, keep = debt{0, 1}, -1
	for i := range owed {
		if f := &from.rules[i]; same && !f.sameLength(p) && rs.hasLength(f) {
			continue // its debt is owed by rs's windows of its length
		}
		if d.less(owed[i]) {
			d = owed[i]
		}
	}
	if p.alg == keyrate.TokenBucket || p.alg == keyrate.SlidingLog {
		return d, -1
	}
	for i := range owed {
		if f := &from.rules[i]; f.alg == p.alg && f.win == p.win && !owed[i].less(d) {
			return d, i
		}
	}
	return d, -1
}

// length returns the length of p's window in ns, as a fraction num/den:
// for a window algorithm and a log, its Per; for a token bucket, its fill
// time, Burst·Per/Rate (its Per when Burst is Rate), the time over which
// it remembers a spend. Carry matches windows by it. (A token bucket's
// Per alone is not a property of the bucket: PerSecond(10) and 1 every
// 100ms are the same bucket. Its fill time is, and redisbucket's script
// reads it from the descriptor a value records.)
func (p *Rule) length() (num, den uint64) {
	if p.alg == keyrate.TokenBucket {
		return p.fill, p.scale
	}
	return p.win, 1
}

// sameLength reports whether p and q have windows of the same length.
func (p *Rule) sameLength(q *Rule) bool {
	a, b := p.length()
	c, d := q.length()
	h1, l1 := bits.Mul64(a, d)
	h2, l2 := bits.Mul64(c, b)
	return h1 == h2 && l1 == l2
}

// hasLength reports whether one of rs's windows is as long as f's.
func (rs *Rules) hasLength(f *Rule) bool {
	for i := range rs.rules {
		if rs.rules[i].sameLength(f) {
			return true
		}
	}
	return false
}
