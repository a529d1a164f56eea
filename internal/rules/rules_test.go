package rules_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/rules"
)

// This file checks rules.Rules, the all-or-nothing transition over a
// policy's windows, against a reference written from the documentation
// alone: an ideal token bucket per window in exact rational arithmetic
// (math/big.Rat), with no ticks, no packed state and no scale.
//
// Where the implementation may differ from the ideal bucket, and how the
// reference deals with it:
//
//   - A coarse rule (Rule.Exact false) rounds its token interval up, so it
//     refills up to 0.01% slower than the ideal bucket. A window is compared
//     exactly only while its rule is exact and every rule it was carried
//     from since it was last full was exact too (refWindow.exact). Any
//     other window is checked one way only: the implementation holds no
//     more tokens than the reference, and so never admits a request the
//     reference would deny.
//   - Carry carries a window's debt (the tokens it has spent and not yet
//     refilled) whole, and rounds a debt that is not a whole number of the
//     new window's ticks up to the tick above, against the client: the new
//     window then lacks less than one tick's worth of a token (1/Interval
//     of a token, Interval being the ticks per token) more than the old
//     debt, so it answers a request, and is full again, at most one tick
//     (1/Scale ns) later than the ideal bucket would. The reference applies
//     the same rounding (refWindow.carryFrom) so that it can keep comparing
//     exactly; TestRulesCarryRounding checks that the rounding is up and by
//     less than a tick. At whole-nanosecond clock readings one such
//     rounding changes no Decision field (every threshold is a whole
//     number of ticks); a second carry of an already rounded window can.
//   - The debt is not capped at the new Burst: a window carried to a
//     smaller one can owe tokens, and the reference's window then holds a
//     negative number of them (Remaining 0, and a RetryAfter longer than
//     the fill time). Carry caps a debt only at 2^62 ticks, which no
//     reference run reaches (TestRulesCarryCap checks the cap).

// ratInt returns n as a big.Rat.
func ratInt(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

// floorRat returns ⌊r⌋ for r ≥ 0.
func floorRat(r *big.Rat) *big.Int { return new(big.Int).Quo(r.Num(), r.Denom()) }

// ceilRat returns ⌈r⌉ for r ≥ 0.
func ceilRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// refWindow is one window of the reference: an ideal token bucket holding
// tokens ≤ Burst, which grow by Rate/Per every nanosecond. They are
// negative while the window owes tokens, after a carry to a window whose
// Burst is below the debt it carried.
type refWindow struct {
	limit  keyrate.Limit
	rule   *rules.Rule // the implementation's window: for Exact and Scale
	tokens *big.Rat
	// exact is true while the implementation must hold exactly tokens:
	// the window's rule is exact, and so was every rule the window was
	// carried from since the implementation's window was last full. While
	// it is false the implementation may hold fewer tokens, never more.
	exact bool
}

func newRefWindow(l keyrate.Limit, r *rules.Rule) *refWindow {
	return &refWindow{limit: l, rule: r, tokens: ratInt(int64(l.Burst)), exact: r.Exact()}
}

func (w *refWindow) burst() *big.Rat { return ratInt(int64(w.limit.Burst)) }

// perNs returns the refill rate in tokens per nanosecond.
func (w *refWindow) perNs() *big.Rat { return big.NewRat(int64(w.limit.Rate), int64(w.limit.Per)) }

func (w *refWindow) refill(d time.Duration) {
	w.tokens.Add(w.tokens, new(big.Rat).Mul(ratInt(int64(d)), w.perNs()))
	if b := w.burst(); w.tokens.Cmp(b) > 0 {
		w.tokens = b
	}
}

func (w *refWindow) holds(cost int) bool { return w.tokens.Cmp(ratInt(int64(cost))) >= 0 }

// whole returns the whole tokens the window holds: none while it owes.
func (w *refWindow) whole() int {
	if w.tokens.Sign() <= 0 {
		return 0
	}
	return int(floorRat(w.tokens).Int64())
}

// debt returns the tokens spent and not yet refilled.
func (w *refWindow) debt() *big.Rat { return new(big.Rat).Sub(w.burst(), w.tokens) }

// after returns the time the window takes to refill n tokens, rounded up
// to a whole nanosecond; 0 for n ≤ 0.
func (w *refWindow) after(n *big.Rat) time.Duration {
	if n.Sign() <= 0 {
		return 0
	}
	ns := ceilRat(new(big.Rat).Quo(n, w.perNs()))
	if !ns.IsInt64() {
		panic("reference duration overflows")
	}
	return time.Duration(ns.Int64())
}

// wait returns the time until the window holds cost tokens.
func (w *refWindow) wait(cost int) time.Duration {
	return w.after(new(big.Rat).Sub(ratInt(int64(cost)), w.tokens))
}

// toFull returns the time until the window is full.
func (w *refWindow) toFull() time.Duration { return w.after(w.debt()) }

// interval returns the ticks per token of w's rule, Per·Scale/Rate: a
// whole number for an exact rule.
func (w *refWindow) interval() *big.Rat {
	return big.NewRat(int64(w.limit.Per)*int64(w.rule.Scale()), int64(w.limit.Rate))
}

// carryFrom sets w, a window of a key's new policy and full, from old,
// window i of its previous one: w lacks the tokens old lacked (its debt),
// uncapped, so that it owes what the debt exceeds its Burst by, and a full
// window stays full. For an exact rule the debt is first rounded up to a
// whole tick of w's rule, as Rule.Carry documents (see the file comment); a
// coarse rule's ticks are not a known fraction of a token, and there the
// unrounded debt keeps the reference an upper bound.
func (w *refWindow) carryFrom(old *refWindow) {
	w.exact = w.rule.Exact() && old.exact
	debt := old.debt()
	if debt.Sign() == 0 {
		return
	}
	if w.rule.Exact() {
		interval := w.interval()
		if !interval.IsInt() {
			panic(fmt.Sprintf("%v: an exact rule with %v ticks a token", w.limit, interval))
		}
		ticks := ceilRat(new(big.Rat).Mul(debt, interval))
		debt = new(big.Rat).Quo(new(big.Rat).SetInt(ticks), interval)
	}
	w.tokens = new(big.Rat).Sub(w.burst(), debt)
}

// refBucket is one key's bucket in the reference: a window per limit of
// its policy.
type refBucket struct {
	policy keyrate.Policy
	w      []*refWindow
	at     time.Duration // the clock reading the windows were refilled to
}

// newRefBucket returns a full bucket under rs's policy at reading at.
func newRefBucket(rs *rules.Rules, at time.Duration) *refBucket {
	b := &refBucket{policy: rs.Policy(), at: at}
	for i, l := range b.policy.Limits {
		b.w = append(b.w, newRefWindow(l, rs.Rule(i)))
	}
	return b
}

func (b *refBucket) advance(t time.Duration) {
	if t < b.at {
		panic("the reference's clock went backwards")
	}
	for _, w := range b.w {
		w.refill(t - b.at)
	}
	b.at = t
}

// decide is a request of cost: it is allowed iff every window holds cost,
// and then, if spend is set, spends cost from every window. It returns the
// request's Decision and the first window that does not hold cost, or -1.
func (b *refBucket) decide(cost int, spend bool) (keyrate.Decision, int) {
	if b.policy.Unlimited {
		return keyrate.Decision{Allowed: true, Policy: b.policy.Name, Remaining: math.MaxInt}, -1
	}
	denied := -1
	for i, w := range b.w {
		if !w.holds(cost) {
			denied = i
			break
		}
	}
	if denied < 0 && spend {
		for _, w := range b.w {
			w.tokens.Sub(w.tokens, ratInt(int64(cost)))
		}
	}
	d := keyrate.Decision{Allowed: denied < 0, Policy: b.policy.Name, Window: denied, Remaining: math.MaxInt}
	for _, w := range b.w {
		d.Remaining = min(d.Remaining, w.whole())
		d.ResetAfter = max(d.ResetAfter, w.toFull())
		if !d.Allowed {
			d.RetryAfter = max(d.RetryAfter, w.wait(cost))
		}
	}
	// The first window with the fewest whole tokens: on a denial, one that
	// denied.
	d.Window = slices.IndexFunc(b.w, func(w *refWindow) bool { return w.whole() == d.Remaining })
	if !d.Allowed && b.w[d.Window].holds(cost) {
		panic(fmt.Sprintf("window %d has the fewest tokens and did not deny cost %d", d.Window, cost))
	}
	d.Limit = b.policy.Limits[d.Window]
	d.WindowResetAfter = b.w[d.Window].toFull()
	return d, denied
}

// refund gives cost tokens back to every window, capped at its Burst, or
// nothing if any window owes more than its Burst (holds fewer than none).
func (b *refBucket) refund(cost int) {
	for _, w := range b.w {
		if w.tokens.Sign() < 0 {
			return
		}
	}
	for _, w := range b.w {
		w.tokens.Add(w.tokens, ratInt(int64(cost)))
		if bu := w.burst(); w.tokens.Cmp(bu) > 0 {
			w.tokens = bu
		}
	}
}

// carry moves the bucket to rs's policy (docs/design/carry.md): new
// window j lacks the most that any old window it matches lacked
// (matchedWindows), uncapped (so a full window stays full). A key from an
// unlimited policy, which has no windows, starts full.
func (b *refBucket) carry(rs *rules.Rules) {
	nb := newRefBucket(rs, b.at)
	for j, w := range nb.w {
		if i := b.mostOwing(nb.policy.Limits, j); i >= 0 {
			w.carryFrom(b.w[i])
		}
		// The implementation's debts are exact only where the windows
		// are, and so then is which one it finds largest.
		for _, i := range matchedWindows(b.policy.Limits, nb.policy.Limits, j) {
			w.exact = w.exact && b.w[i].exact
		}
	}
	*b = *nb
}

// mostOwing returns which of b's windows that window j of a policy of
// limits matches lacks the most tokens (the first of equals), or -1 if b
// has no windows.
func (b *refBucket) mostOwing(limits []keyrate.Limit, j int) int {
	most := -1
	for _, i := range matchedWindows(b.policy.Limits, limits, j) {
		if most < 0 || b.w[i].debt().Cmp(b.w[most].debt()) > 0 {
			most = i
		}
	}
	return most
}

// matchedWindows returns the windows of a policy of limits from whose
// debts window j of a policy of limits to takes the largest of, as
// docs/design/carry.md says: those of from of its length and those whose
// length to lacks, or all of from's if none has its length.
func matchedWindows(from, to []keyrate.Limit, j int) []int {
	has := func(ls []keyrate.Limit, l keyrate.Limit) bool {
		return slices.ContainsFunc(ls, func(m keyrate.Limit) bool { return windowLength(m).Cmp(windowLength(l)) == 0 })
	}
	var out []int
	for i, l := range from {
		if !has(from, to[j]) || windowLength(l).Cmp(windowLength(to[j])) == 0 || !has(to, l) {
			out = append(out, i)
		}
	}
	return out
}

// windowLength is the length a carry matches windows by, in ns: a token
// bucket's fill time Burst·Per/Rate, exactly (a coarse rule's rounded
// interval aside), and any other limit's Per.
func windowLength(l keyrate.Limit) *big.Rat {
	if l.Algorithm != keyrate.TokenBucket {
		return ratInt(int64(l.Per))
	}
	r, err := rules.NewRule(l, nil)
	if err != nil {
		panic(err)
	}
	// Burst tokens of the rule's interval: Per/Rate rounded up to a tick
	// of 1/Scale ns for a coarse rule, exact otherwise.
	return new(big.Rat).SetFrac(new(big.Int).SetUint64(uint64(l.Burst)*ruleInterval(&r)), new(big.Int).SetUint64(r.Scale()))
}

// fmtDecision formats d on one line, every field named.
func fmtDecision(d keyrate.Decision) string {
	return fmt.Sprintf("{allowed %v, policy %q, window %d (%v), remaining %d, retry %v, reset %v, window reset %v}",
		d.Allowed, d.Policy, d.Window, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.WindowResetAfter)
}

// held returns the tokens the window of rule in state s holds at reading
// t, exactly (negative while it owes), and whether it is full, from the
// documented encoding: s is the tick at which the window is next full, and
// it lacks a token for every ruleInterval ticks before that.
func held(rule *rules.Rule, s rules.State, t time.Duration) (*big.Rat, bool) {
	now := rule.Ticks(t)
	burst := rule.Limit().Burst
	if rule.Full(s, now) {
		return ratInt(int64(burst)), true
	}
	debt := new(big.Rat).SetFrac(new(big.Int).SetUint64(uint64(s)-now), new(big.Int).SetUint64(ruleInterval(rule)))
	return new(big.Rat).Sub(ratInt(int64(burst)), debt), false
}

// ruleInterval returns rule's ticks per token, Encode(Burst−1, 0): the
// state of a window one token short at tick 0.
func ruleInterval(rule *rules.Rule) uint64 { return uint64(rule.Encode(rule.Limit().Burst-1, 0)) }

// carried returns the tokens a window of rule holds after a carry from a
// window of Burst burst0 that held old: it lacks what that window lacked
// (burst0 − old tokens, its debt), rounded up to a whole tick of rule and
// not capped at its Burst (Rule.Carry's cap at 2^62 ticks aside).
func carried(rule *rules.Rule, old *big.Rat, burst0 int) *big.Rat {
	debt := new(big.Rat).Sub(ratInt(int64(burst0)), old)
	interval := new(big.Rat).SetInt(new(big.Int).SetUint64(ruleInterval(rule)))
	ticks := ceilRat(debt.Mul(debt, interval))
	return new(big.Rat).Sub(ratInt(int64(rule.Limit().Burst)), new(big.Rat).Quo(new(big.Rat).SetInt(ticks), interval))
}

// byteSource hands out a fuzzer's bytes as small numbers, zeros once
// they run out.
type byteSource struct{ data []byte }

func (s *byteSource) byte() byte {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

// intn returns a number in [0, n) from two bytes.
func (s *byteSource) intn(n int) int { return int((uint(s.byte())<<8 | uint(s.byte())) % uint(n)) }

// u32 returns a number from four bytes.
func (s *byteSource) u32() uint32 {
	return uint32(s.byte())<<24 | uint32(s.byte())<<16 | uint32(s.byte())<<8 | uint32(s.byte())
}

// refPers are the periods of generated limits: with rates up to 40 they
// give exact rules at scale 1 (1s, 1m) and above (PerSecond(7) is scale 7,
// 3 per 10µs is scale 3, 999999937 is prime), coarse rules (17 per
// second), and limits too fast to compile (37 per 10µs).
var refPers = []time.Duration{
	time.Second, time.Minute, 10 * time.Second, time.Hour,
	7 * time.Millisecond, 10 * time.Microsecond, 3 * time.Second, 999_999_937,
}

// genLimit returns a valid limit drawn from src, exact five times in
// eight or more.
func genLimit(src *byteSource) keyrate.Limit {
	rate := 1 + src.intn(40)
	l := keyrate.Limit{Rate: rate, Per: refPers[src.intn(len(refPers))], Burst: 1 + src.intn(30)}
	b := src.byte()
	if b%4 == 0 {
		l.Burst = rate
	}
	if r, err := rules.NewRule(l, nil); err != nil || (!r.Exact() && b%8 >= 3) {
		// Mostly exact rules, which the reference compares exactly: a
		// rate of at most MaxScale is exact whatever the period.
		l.Rate = 1 + rate%keyrate.MaxScale
	}
	return l
}

// genPolicy returns a valid policy named name drawn from src: unlimited one
// time in eight, otherwise of 1 to 3 windows, or up to MaxLimits one time
// in eight.
func genPolicy(src *byteSource, name string) keyrate.Policy {
	switch b := src.byte(); {
	case b%8 == 0:
		return keyrate.Unlimited(name)
	default:
		n := 1 + src.intn(3)
		if b%8 == 1 {
			n = 1 + src.intn(keyrate.MaxLimits)
		}
		p := keyrate.Policy{Name: name}
		for range n {
			p.Limits = append(p.Limits, genLimit(src))
		}
		return p
	}
}

// minBurst returns the smallest Burst of rs's windows, 5 if it has none.
func minBurst(rs *rules.Rules) int {
	if rs.Unlimited() {
		return 5
	}
	p := rs.Policy()
	b := p.Limits[0].Burst
	for _, l := range p.Limits {
		b = min(b, l.Burst)
	}
	return b
}

// refStats counts what a reference run exercised.
type refStats struct {
	allowed, denied, refunds, carries int
	exactDecisions, boundDecisions    int // compared exactly, one way only
	inexactCarries                    int // carries whose debt the reference rounded
	owingCarries                      int // windows carried over owing tokens
}

// refRun drives one key's states under rules.Rules and the reference
// bucket through the same operations, on a manual clock.
type refRun struct {
	t     testing.TB
	clk   *clock.Manual
	start time.Duration // the clock's first reading, the epoch of pool
	pool  []*rules.Rules
	rs    *rules.Rules
	s     []rules.State
	ref   *refBucket
	log   []string // the operations so far, for failure messages
	stats refStats
}

func (r *refRun) fatalf(format string, args ...any) {
	r.t.Helper()
	log := r.log[max(0, len(r.log)-40):]
	r.t.Fatalf("step %d at +%v under %v: %s\nthe last operations:\n\t%s",
		len(r.log)-1, r.clk.Now()-r.start, r.rs.Policy(), fmt.Sprintf(format, args...), strings.Join(log, "\n\t"))
}

// runReference decodes a pool of policies and a sequence of operations
// from data and applies them to rules.Rules and to the reference,
// comparing after every operation. It returns what the run exercised.
func runReference(t testing.TB, data []byte) refStats {
	t.Helper()
	src := &byteSource{data: data}
	start := time.Hour + time.Duration(src.u32())
	clk := clock.NewManual(start)
	r := &refRun{t: t, clk: clk, start: start}
	for i := range 1 + src.intn(4) {
		// Every Rules of the pool is compiled at the same reading, so
		// that they share an epoch (as a store's do) and Carry applies.
		rs, err := rules.NewRules(genPolicy(src, fmt.Sprint("p", i)), clk)
		if err != nil {
			t.Fatalf("NewRules: %v", err)
		}
		r.pool = append(r.pool, rs)
	}
	r.rs = r.pool[0]
	r.s = make([]rules.State, r.rs.Len())
	r.ref = newRefBucket(r.rs, clk.Now())
	r.log = append(r.log, fmt.Sprintf("start under %v", r.rs.Policy()))
	for len(src.data) > 0 {
		switch op := src.byte() % 16; {
		case op <= 6:
			cost := 1
			if op%2 == 0 {
				cost = 1 + src.intn(minBurst(r.rs))
			}
			r.take(cost)
		case op <= 8:
			r.refund(1 + src.intn(minBurst(r.rs)))
		case op == 9:
			r.peek()
		case op <= 13:
			r.advance(r.genStep(src))
		case op == 14:
			r.carry(r.pool[src.intn(len(r.pool))])
		default:
			r.advance(1)
		}
		r.check()
	}
	return r.stats
}

// genStep returns a time step drawn from src: none, a few nanoseconds, up
// to twice the shortest token interval, up to the longest fill time, or
// whole milliseconds.
func (r *refRun) genStep(src *byteSource) time.Duration {
	interval, fill := time.Second, time.Second
	for _, l := range r.rs.Policy().Limits {
		interval = min(interval, l.Per/time.Duration(l.Rate)+1)
		fill = max(fill, l.FillTime())
	}
	switch src.byte() % 6 {
	case 0:
		return 0
	case 1:
		return time.Duration(1 + src.intn(1000))
	case 2:
		return time.Duration(src.u32()) % (2*interval + 1)
	case 3:
		return fill / 65536 * time.Duration(src.intn(65536+4096))
	case 4:
		return time.Duration(src.intn(2000)) * time.Millisecond
	default:
		return interval
	}
}

func (r *refRun) advance(d time.Duration) {
	r.log = append(r.log, fmt.Sprintf("advance %v", d))
	r.ref.advance(r.clk.Advance(d))
}

// take spends cost under rules.Rules and the reference. Where every
// window is compared exactly (refWindow.exact) the Decisions must be
// equal; otherwise the reference follows the implementation's decision,
// which must not admit what the reference denies, and must agree with it
// on every window compared exactly.
func (r *refRun) take(cost int) {
	r.t.Helper()
	r.log = append(r.log, fmt.Sprintf("Take(cost %d)", cost))
	if err := r.rs.CheckCost(cost); err != nil {
		r.fatalf("CheckCost(%d) = %v", cost, err)
	}
	t := r.clk.Now()
	before := slices.Clone(r.s)
	denied := r.rs.Take(r.s, t, cost)
	got := r.rs.Decide(r.s, t, cost, denied)
	_, refDenied := r.ref.decide(cost, false)
	if got.Allowed {
		r.stats.allowed++
	} else {
		r.stats.denied++
	}
	if r.allExact() {
		r.stats.exactDecisions++
		want, _ := r.ref.decide(cost, true)
		if denied != refDenied || got != want {
			r.fatalf("Take(cost %d) = %d, Decide = %s;\nwant %d, %s", cost, denied, fmtDecision(got), refDenied, fmtDecision(want))
		}
		return
	}
	r.stats.boundDecisions++
	if denied < 0 && refDenied >= 0 {
		r.fatalf("Take(cost %d) allowed; the reference denies it in window %d", cost, refDenied)
	}
	for i, w := range r.ref.w {
		if !w.exact {
			continue
		}
		rule := r.rs.Rule(i)
		if _, ok := rule.Take(before[i], rule.Ticks(t), cost); ok != w.holds(cost) {
			r.fatalf("window %d (exact) holds cost %d: %v; the reference: %v", i, cost, ok, w.holds(cost))
		}
	}
	if denied >= 0 && !slices.Equal(before, r.s) {
		r.fatalf("a denied Take changed the states: %v -> %v", before, r.s)
	}
	want, _ := r.ref.decide(cost, denied < 0)
	r.checkBound("Decide", got, want, denied, cost)
}

// checkBound checks a Decision for cost from windows not all compared
// exactly against the reference's, which holds at least as many tokens in
// every window; denied is the first window that denied, or -1.
func (r *refRun) checkBound(what string, got, ref keyrate.Decision, denied, cost int) {
	r.t.Helper()
	p := r.rs.Policy()
	switch {
	case got.Policy != p.Name || got.Allowed != (denied < 0):
		r.fatalf("%s = %s, want policy %q, allowed %v", what, fmtDecision(got), p.Name, denied < 0)
	case denied >= 0 && (got.Remaining >= cost || got.RetryAfter <= 0):
		r.fatalf("%s = %s, want a window that denies cost %d (window %d does) and a RetryAfter", what, fmtDecision(got), cost, denied)
	case denied < 0 && got.RetryAfter != 0:
		r.fatalf("%s = %s: allowed with a RetryAfter", what, fmtDecision(got))
	case got.Window < 0 || got.Window >= len(p.Limits) || got.Limit != p.Limits[got.Window]:
		r.fatalf("%s = %s: Limit is not the Window's", what, fmtDecision(got))
	case got.Remaining > ref.Remaining || got.RetryAfter < ref.RetryAfter || got.ResetAfter < ref.ResetAfter:
		r.fatalf("%s = %s: more generous than the reference %s", what, fmtDecision(got), fmtDecision(ref))
	case got.WindowResetAfter > got.ResetAfter:
		r.fatalf("%s = %s: WindowResetAfter above ResetAfter", what, fmtDecision(got))
	}
}

func (r *refRun) refund(cost int) {
	r.log = append(r.log, fmt.Sprintf("Refund(cost %d)", cost))
	r.stats.refunds++
	r.rs.Refund(r.s, r.clk.Now(), cost)
	r.ref.refund(cost)
}

func (r *refRun) peek() {
	r.t.Helper()
	r.log = append(r.log, "Peek")
	t := r.clk.Now()
	before := slices.Clone(r.s)
	got := r.rs.Peek(r.s, t)
	if !slices.Equal(before, r.s) {
		r.fatalf("Peek changed the states: %v -> %v", before, r.s)
	}
	want, refDenied := r.ref.decide(1, false)
	if r.allExact() {
		if got != want {
			r.fatalf("Peek = %s, want %s", fmtDecision(got), fmtDecision(want))
		}
		return
	}
	denied := -1
	if !got.Allowed {
		denied = got.Window
	}
	if denied < 0 && refDenied >= 0 {
		r.fatalf("Peek = %s; the reference denies a cost-1 request: %s", fmtDecision(got), fmtDecision(want))
	}
	r.checkBound("Peek", got, want, denied, 1)
}

func (r *refRun) carry(to *rules.Rules) {
	r.log = append(r.log, fmt.Sprintf("Carry to %v", to.Policy()))
	r.stats.carries++
	t := r.clk.Now()
	into := make([]rules.State, to.Len())
	to.Carry(r.rs, r.s, t, into)
	r.ref.carry(to)
	for i := range to.Len() {
		// Window i lacks the most that a window it matches lacked, in
		// tokens, rounded up to a whole tick of its new rule, whichever
		// the rules (coarse ones too): the implementation's own debt
		// carries whole, and a full window stays full. A window that
		// matches no window (from an unlimited policy) starts full.
		now, nowFull := held(to.Rule(i), into[i], t)
		src, most := -1, new(big.Rat)
		for _, k := range matchedWindows(r.rs.Policy().Limits, to.Policy().Limits, i) {
			old, _ := held(r.rs.Rule(k), r.s[k], t)
			debt := new(big.Rat).Sub(ratInt(int64(r.rs.Rule(k).Limit().Burst)), old)
			if src < 0 || debt.Cmp(most) > 0 {
				src, most = k, debt
			}
		}
		if src < 0 || most.Sign() == 0 {
			if !nowFull {
				r.fatalf("Carry to %v: window %d, which owes nothing, holds %v tokens, not full", to.Policy(), i, now.RatString())
			}
			continue
		}
		old, _ := held(r.rs.Rule(src), r.s[src], t)
		if want := carried(to.Rule(i), old, r.rs.Rule(src).Limit().Burst); nowFull || now.Cmp(want) != 0 {
			r.fatalf("Carry to %v: window %d's match %d held %v tokens, window %d now %v (full %v); want %v",
				to.Policy(), i, src, old.RatString(), i, now.RatString(), nowFull, want.RatString())
		}
		if ticks := most.Mul(most, r.ref.w[i].interval()); !ticks.IsInt() && r.ref.w[i].rule.Exact() {
			r.stats.inexactCarries++
		}
		if now.Sign() < 0 {
			r.stats.owingCarries++
		}
	}
	r.rs, r.s = to, into
}

// allExact reports whether every window is compared exactly.
func (r *refRun) allExact() bool {
	for _, w := range r.ref.w {
		if !w.exact {
			return false
		}
	}
	return true
}

// check compares every window's debt with the reference's: equal for a
// window compared exactly, no less otherwise. A window the implementation
// holds full is full in the reference too, and is compared exactly from
// then on if its rule is exact.
func (r *refRun) check() {
	r.t.Helper()
	t := r.clk.Now()
	allFull := true
	for i, w := range r.ref.w {
		rule := r.rs.Rule(i)
		now := rule.Ticks(t)
		h, full := held(rule, r.s[i], t)
		debt := new(big.Rat).Sub(ratInt(int64(w.limit.Burst)), h)
		ref := w.debt()
		tokens := rule.Tokens(r.s[i], now)
		switch {
		case full && ref.Sign() != 0:
			r.fatalf("window %d is full; the reference lacks %v tokens", i, ref.RatString())
		case w.exact && (debt.Cmp(ref) != 0 || tokens != w.whole()):
			r.fatalf("window %d (exact) lacks %v tokens, holding %d; the reference lacks %v, holding %d",
				i, debt.RatString(), tokens, ref.RatString(), w.whole())
		case debt.Cmp(ref) < 0 || tokens > w.whole():
			r.fatalf("window %d lacks %v tokens, holding %d: more than the reference, which lacks %v, holding %d",
				i, debt.RatString(), tokens, ref.RatString(), w.whole())
		}
		if full {
			w.exact = rule.Exact()
		}
		allFull = allFull && full
	}
	if got := r.rs.Full(r.s, t); got != allFull {
		r.fatalf("Full = %v, want %v", got, allFull)
	}
}

// randomBytes returns n bytes from a generator seeded with seed.
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x6b65797261746531))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestRulesReference replays random operations (spends, refunds, peeks,
// time steps and policy changes carrying the state over) on rules.Rules
// and on the exact reference, comparing every Decision field after every
// operation wherever the implementation is exact (see the file comment).
func TestRulesReference(t *testing.T) {
	runs, size := 60, 3000
	if racetest.Enabled || testing.Short() {
		runs = 10
	}
	var total refStats
	for seed := range runs {
		st := runReference(t, randomBytes(uint64(seed), size))
		total.allowed += st.allowed
		total.denied += st.denied
		total.refunds += st.refunds
		total.carries += st.carries
		total.exactDecisions += st.exactDecisions
		total.boundDecisions += st.boundDecisions
		total.inexactCarries += st.inexactCarries
		total.owingCarries += st.owingCarries
	}
	t.Logf("%+v", total)
	// The runs must exercise every case, or they check little.
	if total.allowed < 1000 || total.denied < 1000 || total.refunds < 500 || total.carries < 100 ||
		total.exactDecisions < 1000 || total.boundDecisions < 100 || total.inexactCarries < 10 || total.owingCarries < 10 {
		t.Errorf("the runs exercised too little: %+v", total)
	}
}

// FuzzRulesReference is TestRulesReference on the fuzzer's inputs: a pool
// of up to four policies and the operations, decoded by runReference.
func FuzzRulesReference(f *testing.F) {
	for seed := range 4 {
		f.Add(randomBytes(uint64(1000+seed), 400))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2048 { // longer runs only slow the fuzzer down
			data = data[:2048]
		}
		runReference(t, data)
	})
}

// TestRulesBound checks the guarantee of keyrate.Policy on long random runs
// of a greedy client that also gives back some of what it spent: over every
// run of consecutive operations spanning T, each window i admits, less what
// is refunded, at most Limits[i].Burst + Limits[i].Rate·T/Limits[i].Per
// tokens, exactly (in big.Rat arithmetic), coarse windows included. Only
// what was spent is refunded, one request's cost at a time.
func TestRulesBound(t *testing.T) {
	runs, ops := 40, 3000
	if racetest.Enabled || testing.Short() {
		runs = 6
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 0x626f756e64))
		src := &byteSource{data: randomBytes(uint64(run)+1<<32, 64)}
		p := keyrate.Policy{Name: "bound"}
		for range 1 + rng.IntN(4) {
			p.Limits = append(p.Limits, genLimit(src))
		}
		clk := clock.NewManual(time.Duration(rng.Int64N(int64(time.Hour))))
		rs, err := rules.NewRules(p, clk)
		if err != nil {
			t.Fatal(err)
		}
		interval, maxCost := time.Second, minBurst(rs)
		for _, l := range p.Limits {
			interval = min(interval, l.Per/time.Duration(l.Rate)+1)
		}
		type event struct {
			at  time.Duration
			net int // cost admitted, or minus cost refunded
		}
		var events []event
		var spent []int // the costs admitted and not refunded
		s := make([]rules.State, rs.Len())
		denied := 0
		for range ops {
			switch x := rng.IntN(100); {
			case x < 30:
				clk.Advance(time.Duration(rng.Int64N(int64(2 * interval))))
			case x < 32:
				clk.Advance(time.Duration(rng.Int64N(int64(p.Limits[rng.IntN(len(p.Limits))].FillTime()))))
			case x < 85:
				cost := 1 + rng.IntN(min(maxCost, 1+rng.IntN(4)))
				if rs.Take(s, clk.Now(), cost) < 0 {
					events = append(events, event{clk.Now(), cost})
					spent = append(spent, cost)
				} else {
					denied++
				}
			case len(spent) > 0:
				i := rng.IntN(len(spent))
				cost := spent[i]
				spent = slices.Delete(spent, i, i+1)
				rs.Refund(s, clk.Now(), cost)
				events = append(events, event{clk.Now(), -cost})
			}
		}
		if denied == 0 || len(events) < ops/10 {
			t.Fatalf("run %d: %d events, %d denials: the client is not limited", run, len(events), denied)
		}
		// For events i..j, with sum(k) the net of events before k, the
		// bound is sum(j+1) − sum(i) ≤ Burst + Rate·(at_j − at_i)/Per,
		// that is g(j) − h(i) ≤ Burst with g(j) = sum(j+1) − Rate·at_j/Per
		// and h(i) = sum(i) − Rate·at_i/Per. Scanning i downwards with the
		// greatest g(j) for j ≥ i checks every one of the n(n+1)/2 runs.
		for w, l := range p.Limits {
			rate := big.NewRat(int64(l.Rate), int64(l.Per))
			burst := ratInt(int64(l.Burst))
			sum := make([]int64, len(events)+1)
			for k, e := range events {
				sum[k+1] = sum[k] + int64(e.net)
			}
			at := func(k int) *big.Rat { return new(big.Rat).Mul(rate, ratInt(int64(events[k].at))) }
			var best *big.Rat // the greatest g(j), j ≥ i
			bestJ := 0
			for i := len(events) - 1; i >= 0; i-- {
				if g := new(big.Rat).Sub(ratInt(sum[i+1]), at(i)); best == nil || g.Cmp(best) > 0 {
					best, bestJ = g, i
				}
				h := new(big.Rat).Sub(ratInt(sum[i]), at(i))
				if excess := new(big.Rat).Sub(best, h); excess.Cmp(burst) > 0 {
					span := events[bestJ].at - events[i].at
					t.Fatalf("run %d, window %d (%v) of %v: events %d..%d over %v admit %d net, above %v + %v",
						run, w, l, p, i, bestJ, span, sum[bestJ+1]-sum[i], burst,
						new(big.Rat).Mul(rate, ratInt(int64(span))).FloatString(3))
				}
			}
		}
	}
}

// stepOp is the operation of a step of a step table.
type stepOp int

const (
	opTake   stepOp = iota // Take(cost) then Decide
	opRefund               // Refund(cost), then Peek
	opPeek                 // Peek
	opCarry                // Carry to policies[to], then Peek
)

// rulesStep is one row of a step table: an operation at a reading since
// the epoch, and the Decision it returns (for Take and Peek) or that a
// Peek after it returns. Its Policy and Limit may be left empty: the
// table's runner fills them in from the current policy and the Window.
type rulesStep struct {
	at   time.Duration
	op   stepOp
	cost int // Take and Refund
	to   int // Carry: the index of the new policy
	want keyrate.Decision
}

func (st rulesStep) String() string {
	switch st.op {
	case opTake:
		return fmt.Sprintf("Take(cost %d)", st.cost)
	case opRefund:
		return fmt.Sprintf("Refund(cost %d); Peek()", st.cost)
	case opPeek:
		return "Peek()"
	default:
		return fmt.Sprintf("Carry to policy %d; Peek()", st.to)
	}
}

// stepAllow and stepDeny build a step's wanted Decision.
func stepAllow(window, remaining int, reset, windowReset time.Duration) keyrate.Decision {
	return keyrate.Decision{Allowed: true, Window: window, Remaining: remaining, ResetAfter: reset, WindowResetAfter: windowReset}
}

func stepDeny(window, remaining int, retry, reset, windowReset time.Duration) keyrate.Decision {
	return keyrate.Decision{Window: window, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, WindowResetAfter: windowReset}
}

// runSteps compiles policies for one clock and epoch, starts a key full
// under policies[0], and walks it through steps, x/time/rate style.
func runSteps(t *testing.T, policies []keyrate.Policy, steps []rulesStep) {
	t.Helper()
	const epoch = 3 * time.Hour
	clk := clock.NewManual(epoch)
	var pool []*rules.Rules
	for _, p := range policies {
		rs, err := rules.NewRules(p, clk)
		if err != nil {
			t.Fatalf("NewRules(%v): %v", p, err)
		}
		pool = append(pool, rs)
	}
	rs := pool[0]
	s := make([]rules.State, rs.Len())
	last := time.Duration(0)
	for i, st := range steps {
		if st.at < last {
			t.Fatalf("step %d: at %v, before the step before", i, st.at)
		}
		last = st.at
		clk.Set(epoch + st.at)
		now := clk.Now()
		var got keyrate.Decision
		switch st.op {
		case opTake:
			got = rs.Decide(s, now, st.cost, rs.Take(s, now, st.cost))
		case opRefund:
			rs.Refund(s, now, st.cost)
			got = rs.Peek(s, now)
		case opPeek:
			got = rs.Peek(s, now)
		case opCarry:
			into := make([]rules.State, pool[st.to].Len())
			pool[st.to].Carry(rs, s, now, into)
			rs, s = pool[st.to], into
			got = rs.Peek(s, now)
		}
		want := st.want
		if want.Policy == "" {
			want.Policy = rs.Name()
		}
		if want.Limit == (keyrate.Limit{}) && !rs.Unlimited() && want.Window >= 0 && want.Window < rs.Len() {
			want.Limit = rs.Policy().Limits[want.Window]
		}
		if got != want {
			t.Errorf("step %d: %v at %v = %s,\n\twant %s", i, st, st.at, fmtDecision(got), fmtDecision(want))
		}
	}
}

const ms = time.Millisecond

// TestRulesTwoWindows: 10 a second and 20 a minute, a token every 100ms
// in window 0 and every 3s in window 1.
func TestRulesTwoWindows(t *testing.T) {
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(20)}}
	runSteps(t, []keyrate.Policy{pro}, []rulesStep{
		// A full bucket.
		{at: 0, op: opPeek, want: stepAllow(0, 10, 0, 0)},
		// The burst: window 0 has the fewest tokens left.
		{at: 0, op: opTake, cost: 9, want: stepAllow(0, 1, 27*time.Second, 900*ms)},
		{at: 0, op: opTake, cost: 1, want: stepAllow(0, 0, 30*time.Second, time.Second)},
		// Window 0 denies, a token due in 100ms; window 1 is 30s from full.
		{at: 0, op: opTake, cost: 1, want: stepDeny(0, 0, 100*ms, 30*time.Second, time.Second)},
		{at: 0, op: opPeek, want: stepDeny(0, 0, 100*ms, 30*time.Second, time.Second)},
		{at: 99 * ms, op: opTake, cost: 1, want: stepDeny(0, 0, 1*ms, 29901*ms, 901*ms)},
		// Window 0's token; window 1 holds 10 1/30.
		{at: 100 * ms, op: opTake, cost: 1, want: stepAllow(0, 0, 32900*ms, time.Second)},
		// At 1.1s window 0 is full and window 1 holds 9 11/30: after 9
		// window 1 has the fewest whole tokens (0, to window 0's 1).
		{at: 1100 * ms, op: opTake, cost: 9, want: stepAllow(1, 0, 58900*ms, 58900*ms)},
		// The minute quota denies while window 0 has a token: window 1 holds
		// 11/30 of a token, 19/30 short, 1.9s away.
		{at: 1100 * ms, op: opTake, cost: 1, want: stepDeny(1, 0, 1900*ms, 58900*ms, 58900*ms)},
		{at: 1100 * ms, op: opPeek, want: stepDeny(1, 0, 1900*ms, 58900*ms, 58900*ms)},
		{at: 2999 * ms, op: opTake, cost: 1, want: stepDeny(1, 0, 1*ms, 57001*ms, 57001*ms)},
		{at: 3 * time.Second, op: opTake, cost: 1, want: stepAllow(1, 0, time.Minute, time.Minute)},
		// Window 0 holds 9, window 1 none: a cost of 2 waits 6s for window 1.
		{at: 3 * time.Second, op: opTake, cost: 2, want: stepDeny(1, 0, 6*time.Second, time.Minute, time.Minute)},
		// Both deny a cost of 10: Window is the one with the fewest tokens
		// (window 1, none, to window 0's 9), so that Limit, Remaining and
		// WindowResetAfter describe one window; RetryAfter is the longest
		// wait (window 1's 30s).
		{at: 3 * time.Second, op: opTake, cost: 10, want: stepDeny(1, 0, 30*time.Second, time.Minute, time.Minute)},
		// A minute later both are full.
		{at: 63 * time.Second, op: opPeek, want: stepAllow(0, 10, 0, 0)},
	})
}

// TestRulesRefundSteps: a refund of what a request spent restores the
// bucket exactly, and never fills a window above its Burst.
func TestRulesRefundSteps(t *testing.T) {
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerMinute(20)}}
	runSteps(t, []keyrate.Policy{pro}, []rulesStep{
		{at: 0, op: opTake, cost: 5, want: stepAllow(0, 5, 15*time.Second, 500*ms)},
		{at: 50 * ms, op: opTake, cost: 4, want: stepAllow(0, 1, 26950*ms, 850*ms)},
		// Giving back the 4 leaves the bucket as the first request left it.
		{at: 50 * ms, op: opRefund, cost: 4, want: stepAllow(0, 5, 14950*ms, 450*ms)},
		// The same after a token of window 0 refilled.
		{at: 100 * ms, op: opTake, cost: 4, want: stepAllow(0, 2, 26900*ms, 800*ms)},
		{at: 150 * ms, op: opRefund, cost: 4, want: stepAllow(0, 6, 14850*ms, 350*ms)},
		// At 1s window 0 is full and window 1 holds 5 1/3 short of 20:
		// a refund of 5 fills window 1 to 20, not 20 1/3, and leaves
		// window 0 at 10, not 15.
		{at: time.Second, op: opRefund, cost: 5, want: stepAllow(0, 10, 0, 0)},
		{at: time.Second, op: opTake, cost: 10, want: stepAllow(0, 0, 30*time.Second, time.Second)},
		{at: time.Second, op: opTake, cost: 1, want: stepDeny(0, 0, 100*ms, 30*time.Second, time.Second)},
		// A refund of the whole burst empties no debt it does not have.
		{at: time.Second, op: opRefund, cost: 10, want: stepAllow(0, 10, 0, 0)},
		{at: time.Second, op: opRefund, cost: 10, want: stepAllow(0, 10, 0, 0)},
		{at: time.Second, op: opTake, cost: 10, want: stepAllow(0, 0, 30*time.Second, time.Second)},
		{at: time.Second, op: opTake, cost: 1, want: stepDeny(0, 0, 100*ms, 30*time.Second, time.Second)},
	})
}

// TestRulesRefundRestoresStates: a spend and a refund of its cost, with
// nothing in between, leave every window's state as it was.
func TestRulesRefundRestoresStates(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{
		keyrate.PerSecond(7), keyrate.PerMinute(20), {Rate: 17, Per: time.Second, Burst: 9}, // scale 7, 1, coarse
	}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	s := make([]rules.State, rs.Len())
	for i := range 2000 {
		clk.Advance(time.Duration(rng.Int64N(int64(200 * ms))))
		now := clk.Now()
		before := slices.Clone(s)
		cost := 1 + rng.IntN(7)
		if rs.Take(s, now, cost) >= 0 {
			continue
		}
		if rng.IntN(2) == 0 {
			rs.Refund(s, now, cost)
			for w := range s {
				// Equal, or both full (a full state is any tick up to now).
				r := rs.Rule(w)
				if s[w] != before[w] && !(r.Full(s[w], r.Ticks(now)) && r.Full(before[w], r.Ticks(now))) {
					t.Fatalf("step %d: Take(cost %d) then Refund(cost %d) at %v: window %d's state %d -> %d",
						i, cost, cost, now, w, before[w], s[w])
				}
			}
			if got, want := rs.Peek(s, now), rs.Peek(before, now); got != want {
				t.Fatalf("step %d: Peek after Take and Refund = %s, want %s", i, fmtDecision(got), fmtDecision(want))
			}
		}
	}
}

// TestRulesCarrySteps: a key's state carried to another policy, as
// keyrate.PolicyLimiter documents.
func TestRulesCarrySteps(t *testing.T) {
	basic := keyrate.Policy{Name: "basic", Limits: []keyrate.Limit{keyrate.PerMinute(100)}}
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(10000)}}
	small := keyrate.Policy{Name: "small", Limits: []keyrate.Limit{keyrate.PerMinute(50)}}
	quota := keyrate.Policy{Name: "quota", Limits: []keyrate.Limit{keyrate.PerMinute(100), keyrate.PerHour(1000)}}
	policies := []keyrate.Policy{basic, pro, small, quota}
	const toBasic, toPro, toSmall, toQuota = 0, 1, 2, 3
	t.Run("upgrade", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			{at: 0, op: opTake, cost: 60, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			// The 60 spent carry over: 9940 at once, 360ms from full at
			// 6ms a token.
			{at: 0, op: opCarry, to: toPro, want: stepAllow(0, 9940, 360*ms, 360*ms)},
			// And refill at the new rate: 354ms + 41·6ms.
			{at: 6 * ms, op: opTake, cost: 41, want: stepAllow(0, 9900, 600*ms, 600*ms)},
			{at: 6 * ms, op: opTake, cost: 9900, want: stepAllow(0, 0, time.Minute, time.Minute)},
			{at: 6 * ms, op: opTake, cost: 1, want: stepDeny(0, 0, 6*ms, time.Minute, time.Minute)},
		})
	})
	t.Run("upgrade a full bucket", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			// An idle client's full bucket stays full: all 10000.
			{at: 0, op: opCarry, to: toPro, want: stepAllow(0, 10000, 0, 0)},
			{at: 0, op: opTake, cost: 10000, want: stepAllow(0, 0, time.Minute, time.Minute)},
		})
	})
	t.Run("downgrade", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			{at: 0, op: opTake, cost: 60, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			// 60 spent, above the new Burst of 50: none held, 10 owed, at
			// 1.2s a token. A token is 11 tokens' time away, 13.2s, and
			// the bucket 60 tokens', 72s, from full: beyond its fill time.
			{at: 0, op: opCarry, to: toSmall, want: stepDeny(0, 0, 13200*ms, 72*time.Second, 72*time.Second)},
			{at: 0, op: opTake, cost: 1, want: stepDeny(0, 0, 13200*ms, 72*time.Second, 72*time.Second)},
			{at: 0, op: opTake, cost: 5, want: stepDeny(0, 0, 18*time.Second, 72*time.Second, 72*time.Second)},
			{at: 13199 * ms, op: opPeek, want: stepDeny(0, 0, 1*ms, 58801*ms, 58801*ms)},
			{at: 13200 * ms, op: opTake, cost: 1, want: stepAllow(0, 0, time.Minute, time.Minute)},
			{at: 13200 * ms, op: opTake, cost: 1, want: stepDeny(0, 0, 1200*ms, time.Minute, time.Minute)},
			// Back to basic: the 50 spent are 50 of basic, 30s at 600ms
			// a token.
			{at: 13200 * ms, op: opCarry, to: toBasic, want: stepAllow(0, 50, 30*time.Second, 30*time.Second)},
			// 49.5 spent, 300ms later, are 49.5 of small: half a token
			// short of one.
			{at: 13500 * ms, op: opCarry, to: toSmall, want: stepDeny(0, 0, 600*ms, 59400*ms, 59400*ms)},
		})
	})
	t.Run("downgrade and back", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			{at: 0, op: opTake, cost: 60, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			// A round trip at one instant leaves the bucket as it was:
			// the 10 owed under small are not forgiven.
			{at: 0, op: opCarry, to: toSmall, want: stepDeny(0, 0, 13200*ms, 72*time.Second, 72*time.Second)},
			{at: 0, op: opCarry, to: toBasic, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			// Through pro too, owing or not.
			{at: 0, op: opCarry, to: toSmall, want: stepDeny(0, 0, 13200*ms, 72*time.Second, 72*time.Second)},
			{at: 0, op: opCarry, to: toPro, want: stepAllow(0, 9940, 360*ms, 360*ms)},
			{at: 0, op: opCarry, to: toBasic, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
		})
	})
	t.Run("downgrade of a bucket that spent little", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			// 10 spent are 10 spent under a Burst of 50: 40 held.
			{at: 0, op: opTake, cost: 10, want: stepAllow(0, 90, 6*time.Second, 6*time.Second)},
			{at: 0, op: opCarry, to: toSmall, want: stepAllow(0, 40, 12*time.Second, 12*time.Second)},
			{at: 0, op: opTake, cost: 41, want: stepDeny(0, 40, 1200*ms, 12*time.Second, 12*time.Second)},
			{at: 0, op: opTake, cost: 40, want: stepAllow(0, 0, time.Minute, time.Minute)},
			{at: 0, op: opTake, cost: 1, want: stepDeny(0, 0, 1200*ms, time.Minute, time.Minute)},
		})
	})
	t.Run("downgrade a full bucket", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			// A full bucket of 100 holds 50 under a Burst of 50, not 100.
			{at: 0, op: opCarry, to: toSmall, want: stepAllow(0, 50, 0, 0)},
			{at: 0, op: opTake, cost: 50, want: stepAllow(0, 0, time.Minute, time.Minute)},
			{at: 0, op: opTake, cost: 1, want: stepDeny(0, 0, 1200*ms, time.Minute, time.Minute)},
		})
	})
	t.Run("windows added and dropped", func(t *testing.T) {
		runSteps(t, policies, []rulesStep{
			{at: 0, op: opTake, cost: 60, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			// Window 0 keeps its debt; the hourly window, which no window
			// of basic matches by length, owes the most any owed: 60 of
			// 1000 (3.6s each), 216s.
			{at: 0, op: opCarry, to: toQuota, want: stepAllow(0, 40, 216*time.Second, 36*time.Second)},
			// Window 1 spends 40 more: 100 owed, 360s from full.
			{at: 0, op: opTake, cost: 40, want: stepAllow(0, 0, 360*time.Second, time.Minute)},
			{at: 0, op: opPeek, want: stepDeny(0, 0, 600*ms, 360*time.Second, time.Minute)},
			{at: time.Minute, op: opPeek, want: stepAllow(0, 100, 300*time.Second, 0)},
			// Back to one window: the hourly window's debt (83⅓) rides in
			// the minute window, which basic keeps: 50s of it.
			{at: time.Minute, op: opCarry, to: toBasic, want: stepAllow(0, 16, 50*time.Second, 50*time.Second)},
			// And out again: the hourly window owes it once more.
			{at: time.Minute, op: opCarry, to: toQuota, want: stepAllow(0, 16, 300*time.Second, 50*time.Second)},
		})
	})
	t.Run("to and from unlimited", func(t *testing.T) {
		free := keyrate.Unlimited("free")
		runSteps(t, []keyrate.Policy{basic, free}, []rulesStep{
			{at: 0, op: opTake, cost: 60, want: stepAllow(0, 40, 36*time.Second, 36*time.Second)},
			{at: 0, op: opCarry, to: 1, want: keyrate.Decision{Allowed: true, Remaining: math.MaxInt}},
			// A window the unlimited policy lacked starts full.
			{at: 0, op: opCarry, to: 0, want: stepAllow(0, 100, 0, 0)},
		})
	})
}

// TestRulesCarryRounding: Carry keeps the tokens a window lacked (its
// debt), uncapped by the new Burst and rounded up to a whole tick of the
// new window (by less than 1/Interval of a token, Interval being its ticks
// per token), never down; exactly when the debt is a whole number of
// ticks. A full window stays full, and only a full one is full after.
func TestRulesCarryRounding(t *testing.T) {
	limits := []keyrate.Limit{
		keyrate.PerSecond(3), keyrate.PerSecond(10), keyrate.PerSecond(7).WithBurst(20),
		keyrate.PerMinute(100), {Rate: 3, Per: 10 * time.Second, Burst: 5}, keyrate.PerHour(13).WithBurst(2),
	}
	clk := clock.NewManual(time.Hour)
	var pool []*rules.Rules
	for i, l := range limits {
		rs, err := rules.NewRules(keyrate.Policy{Name: fmt.Sprint(i), Limits: []keyrate.Limit{l}}, clk)
		if err != nil || !rs.Rule(0).Exact() {
			t.Fatalf("NewRules(%v) = %v, exact %v", l, err, err == nil && rs.Rule(0).Exact())
		}
		pool = append(pool, rs)
	}
	// PerSecond(3) counts thirds of a nanosecond; PerSecond(10) whole ones.
	// Take 1 of 3, and 1ns later the window lacks 1 less 3 billionths, a
	// fraction of a nanosecond's tick at 10 a second: rounded up to 1, so
	// that the window holds 9 of 10.
	s := []rules.State{0}
	pool[0].Take(s, clk.Now(), 1)
	clk.Advance(1)
	into := []rules.State{0}
	pool[1].Carry(pool[0], s, clk.Now(), into)
	if h, _ := held(pool[0].Rule(0), s[0], clk.Now()); h.Cmp(big.NewRat(2_000_000_003, 1_000_000_000)) != 0 {
		t.Fatalf("PerSecond(3) after a take and 1ns holds %v, want 2 and 3/10^9", h.RatString())
	}
	if h, _ := held(pool[1].Rule(0), into[0], clk.Now()); h.Cmp(ratInt(9)) != 0 {
		t.Fatalf("carried to PerSecond(10): holds %v, want 9 (a debt of 1 less 3/10^9, rounded up)", h.RatString())
	}

	rng := rand.New(rand.NewPCG(7, 8))
	rounded, owing := 0, 0
	for i := range 5000 {
		from, to := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
		s := []rules.State{0}
		clk.Advance(time.Duration(rng.Int64N(int64(time.Hour))))
		for range 1 + rng.IntN(3) {
			from.Take(s, clk.Now(), 1+rng.IntN(from.Rule(0).Limit().Burst))
			clk.Advance(time.Duration(rng.Int64N(int64(from.Rule(0).Limit().FillTime() / 2))))
		}
		now := clk.Now()
		old, full := held(from.Rule(0), s[0], now)
		into := []rules.State{0}
		to.Carry(from, s, now, into)
		got, gotFull := held(to.Rule(0), into[0], now)
		debt := new(big.Rat).Sub(ratInt(int64(from.Rule(0).Limit().Burst)), old)
		gotDebt := new(big.Rat).Sub(ratInt(int64(to.Rule(0).Limit().Burst)), got)
		interval := newRefWindow(to.Rule(0).Limit(), to.Rule(0)).interval()
		// debt ≤ gotDebt < debt + 1/Interval, and gotDebt·Interval whole.
		high := new(big.Rat).Add(debt, new(big.Rat).Inv(interval))
		ticks := new(big.Rat).Mul(gotDebt, interval)
		if gotFull != full || gotDebt.Cmp(debt) < 0 || gotDebt.Cmp(high) >= 0 || !ticks.IsInt() {
			t.Fatalf("case %d: %v lacking %v (full %v) carried to %v lacks %v (full %v), want it rounded up to a whole tick (1/%v of a token)",
				i, from.Rule(0).Limit(), debt.RatString(), full, to.Rule(0).Limit(), gotDebt.RatString(), gotFull, interval.RatString())
		}
		if gotDebt.Cmp(debt) != 0 {
			rounded++
		}
		if got.Sign() < 0 {
			owing++
		}
	}
	if rounded < 100 || owing < 100 {
		t.Errorf("only %d of the carries rounded, and %d owe tokens", rounded, owing)
	}
}

// TestRulesCarryCap: Carry caps a debt at 2^62 ticks of the new window,
// and only there: a debt of 2^32 tokens of a nanosecond each carries whole
// to a window of a token a second; one of 2^62 tokens, 2^62 seconds of that
// window, is 2^62 ticks (146 years), not a wrapped state.
func TestRulesCarryCap(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	compile := func(l keyrate.Limit) *rules.Rules {
		t.Helper()
		rs, err := rules.NewRules(keyrate.Policy{Name: l.String(), Limits: []keyrate.Limit{l}}, clk)
		if err != nil {
			t.Fatalf("NewRules(%v): %v", l, err)
		}
		return rs
	}
	const cap62 = 1 << 62
	fast := compile(keyrate.Limit{Rate: 1, Per: time.Nanosecond, Burst: cap62})
	slow := compile(keyrate.PerSecond(1))
	if fast.Rule(0).Scale() != 1 || slow.Rule(0).Scale() != 1 {
		t.Fatalf("scales %d and %d, want 1", fast.Rule(0).Scale(), slow.Rule(0).Scale())
	}
	for _, c := range []struct {
		cost  int
		ticks uint64 // the carried debt in ticks of slow
	}{
		{1 << 32, 1 << 32 * uint64(time.Second)}, // 2^32·10^9 < 2^62
		{cap62, cap62},
		{cap62 / int(time.Second), cap62 / uint64(time.Second) * uint64(time.Second)},
		{cap62/int(time.Second) + 1, cap62},
	} {
		now := clk.Now()
		s := []rules.State{0}
		if denied := fast.Take(s, now, c.cost); denied >= 0 {
			t.Fatalf("Take(cost %d) from a full %v denied", c.cost, fast.Policy().Limits[0])
		}
		into := []rules.State{0}
		slow.Carry(fast, s, now, into)
		r := slow.Rule(0)
		if got := uint64(into[0]) - r.Ticks(now); uint64(into[0]) < r.Ticks(now) || got != c.ticks {
			t.Errorf("a debt of %d tokens of 1ns carried to %v: state %d at tick %d, a debt of %d ticks; want %d",
				c.cost, r.Limit(), into[0], r.Ticks(now), int64(got), c.ticks)
		}
		d := slow.Peek(into, now)
		if want := time.Duration(c.ticks); d.Allowed || d.Remaining != 0 || d.ResetAfter != want || d.RetryAfter != want {
			t.Errorf("a debt of %d tokens carried to %v: Peek = %s, want denied, reset and retry after %v",
				c.cost, r.Limit(), fmtDecision(d), want)
		}
		clk.Advance(time.Second)
	}
}

// TestRulesCarryMintsNothing: a key whose policy changes is admitted, over
// a run of length T from a full bucket, at most the largest Burst of its
// policies' first windows plus their largest rate times T, as if it had
// been under the most generous of them all along: carrying window 0's
// state over to another policy must not refill it. (keyrate.Policy's
// bound, Burst + Rate·T/Per, is for a key that stays under one policy; a
// key that changes policy keeps every window's debt in some window of the
// next, matched by length, so window 0's bound is one it keeps too.) A
// client can make its key change policy with every request where the
// policy is chosen per request (AllowTier, WithPolicyFunc on request
// attributes), so this is a bound an attacker can probe.
func TestRulesCarryMintsNothing(t *testing.T) {
	policies := []keyrate.Policy{
		{Name: "browse", Limits: []keyrate.Limit{keyrate.PerMinute(1000)}},
		{Name: "search", Limits: []keyrate.Limit{keyrate.PerMinute(10)}},
		{Name: "burst", Limits: []keyrate.Limit{keyrate.PerSecond(2).WithBurst(300)}},
		{Name: "two", Limits: []keyrate.Limit{keyrate.PerSecond(5).WithBurst(50), keyrate.PerHour(2000)}},
	}
	maxBurst, maxRate := 0, new(big.Rat) // over the policies' windows 0
	for _, p := range policies {
		l := p.Limits[0]
		maxBurst = max(maxBurst, l.Burst)
		if r := big.NewRat(int64(l.Rate), int64(l.Per)); r.Cmp(maxRate) > 0 {
			maxRate = r
		}
	}
	// run replays moves from a full bucket under policies[0]: each moves
	// the key to a policy, steps the clock and spends, checking the bound
	// after every spend.
	type move struct {
		to    int
		step  time.Duration
		spare int // spend all but spare tokens, if that many are left
	}
	run := func(name string, moves []move) bool {
		t.Helper()
		clk := clock.NewManual(time.Hour)
		var pool []*rules.Rules
		for _, p := range policies {
			rs, err := rules.NewRules(p, clk)
			if err != nil {
				t.Fatal(err)
			}
			pool = append(pool, rs)
		}
		start := clk.Now()
		rs, s := pool[0], make([]rules.State, pool[0].Len())
		admitted := 0
		var log []string
		for _, m := range moves {
			now := clk.Advance(m.step)
			into := make([]rules.State, pool[m.to].Len())
			pool[m.to].Carry(rs, s, now, into)
			rs, s = pool[m.to], into
			n := rs.Peek(s, now).Remaining - m.spare
			if n <= 0 {
				continue
			}
			if err := rs.CheckCost(n); err != nil || rs.Take(s, now, n) >= 0 {
				t.Fatalf("%s: Take(cost %d) under %s denied (%v) after Peek reported %d and more remaining", name, n, rs.Name(), err, n)
			}
			admitted += n
			log = append(log, fmt.Sprintf("+%v %s: %d", now-start, rs.Name(), n))
			bound := new(big.Rat).Add(ratInt(int64(maxBurst)), new(big.Rat).Mul(maxRate, ratInt(int64(now-start))))
			if ratInt(int64(admitted)).Cmp(bound) > 0 {
				t.Errorf("%s: over %v a key moving between policies was admitted %d, above %d + %v: %s",
					name, now-start, admitted, maxBurst, new(big.Rat).Sub(bound, ratInt(int64(maxBurst))).FloatString(3),
					strings.Join(log[max(0, len(log)-12):], ", "))
				return false
			}
		}
		return true
	}
	// browse spends all but search's Burst of 10; search then holds none
	// (it owes 980), and browse again holds 10, not 1000. Capping a
	// carried window's tokens at the new Burst made search full, and a
	// full window stays full, so this admitted 990 more each round trip.
	var moves []move
	for range 10 {
		moves = append(moves, move{to: 0, step: time.Nanosecond, spare: 10}, move{to: 1, step: time.Nanosecond, spare: 1 << 30})
	}
	run("browse and search", moves)

	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 200 {
		moves = moves[:0]
		for range 40 {
			m := move{to: rng.IntN(len(policies)), step: time.Duration(rng.Int64N(int64(100 * ms)))}
			switch rng.IntN(3) {
			case 0:
				m.spare = 0
			case 1:
				m.spare = rng.IntN(50)
			default: // what another policy's window can hold
				p := policies[rng.IntN(len(policies))]
				m.spare = p.Limits[rng.IntN(len(p.Limits))].Burst
			}
			moves = append(moves, m)
		}
		if !run(fmt.Sprint("random ", i), moves) {
			break
		}
	}
}
