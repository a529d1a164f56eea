package conformance

import (
	"math/big"
	"slices"
	"time"

	"github.com/keyrate/keyrate"
)

// This file is the exact model of one key's decisions that CarryModel
// (carrydriver.go) checks the stores against: the token bucket, the fixed
// and sliding windows and the sliding log as docs/guides/algorithms.md
// states them, policies of several windows all or nothing, and a
// change of policy carried as docs/design/carry.md states it (debt out
// of every old window, matched to the new windows by length, debt in as
// spent at the carry instant, and the two exceptions that keep a window
// exactly). It is written from those documents alone, in exact
// arithmetic (math/big), and shares nothing with internal/rules: where
// the two disagree, one of them or the document is wrong.
//
// Times are the store's clock readings in ns; a window algorithm's
// windows are aligned to an origin (see CarryStore.Origin).

// mEntry is one admission of a sliding log: cost, in the window until
// exit.
type mEntry struct {
	exit time.Duration
	cost int64
}

// mWin is one window of a key's state under one limit: a token bucket's
// theoretical arrival time, a window algorithm's count per window, or a
// sliding log's admissions. It is what the limit's algorithm needs, and
// no more: two mWins of one limit that decide alike from t on are equal
// after prune(t).
type mWin struct {
	lim keyrate.Limit
	// tat is a token bucket's theoretical arrival time (ns, exact): the
	// bucket is full at tat and after, and nil stands for a full bucket.
	tat *big.Rat
	// counts are a fixed or sliding window's admitted cost per window
	// index (see model.index).
	counts map[int64]int64
	// log is a sliding log's admissions, oldest first.
	log []mEntry
}

// mKey is one key's state in the model: the limits it was last decided
// under (nil for a key with no state: new, or only ever decided under an
// unlimited policy, which stores nothing) and a window for each.
type mKey struct {
	limits []keyrate.Limit
	wins   []*mWin
}

// exact is the exact model of a store's keys: windows of a window
// algorithm start at origin + k·W.
type exact struct {
	origin time.Duration
	keys   map[string]*mKey
}

// newExact returns the model of an empty store whose windows start at
// origin.
func newExact(origin time.Duration) *exact {
	return &exact{origin: origin, keys: map[string]*mKey{}}
}

// rat returns n/d.
func rat(n, d int64) *big.Rat { return big.NewRat(n, d) }

// ratD returns a duration as a rational number of ns.
func ratD(t time.Duration) *big.Rat { return new(big.Rat).SetInt64(int64(t)) }

// ceilRat returns ⌈r⌉.
func ceilRat(r *big.Rat) int64 {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// floorRat returns ⌊r⌋.
func floorRat(r *big.Rat) int64 {
	q, _ := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	return q.Int64()
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// interval is a token bucket's token interval Per/Rate, in ns.
func interval(l keyrate.Limit) *big.Rat { return rat(int64(l.Per), int64(l.Rate)) }

// isWindow reports whether l is a fixed or sliding window.
func isWindow(l keyrate.Limit) bool {
	return l.Algorithm == keyrate.FixedWindow || l.Algorithm == keyrate.SlidingWindow
}

// index returns the index of the window of length w that t falls in, and
// t's offset in it.
func (m *exact) index(t, w time.Duration) (c int64, e time.Duration) {
	c = floorDiv(int64(t-m.origin), int64(w))
	return c, t - m.origin - time.Duration(c)*w
}

// newWin returns a full window of lim.
func newWin(lim keyrate.Limit) *mWin {
	w := &mWin{lim: lim}
	if isWindow(lim) {
		w.counts = map[int64]int64{}
	}
	return w
}

// clone returns a deep copy of w.
func (w *mWin) clone() *mWin {
	c := &mWin{lim: w.lim, log: slices.Clone(w.log)}
	if w.tat != nil {
		c.tat = new(big.Rat).Set(w.tat)
	}
	if w.counts != nil {
		c.counts = make(map[int64]int64, len(w.counts))
		for i, n := range w.counts {
			c.counts[i] = n
		}
	}
	return c
}

// prune drops what no longer weighs at t: a token bucket full again, the
// counts of windows before the previous one, a log's admissions that have
// left the window. It changes no decision from t on.
func (m *exact) prune(w *mWin, t time.Duration) {
	switch {
	case w.lim.Algorithm == keyrate.TokenBucket:
		if w.tat != nil && w.tat.Cmp(ratD(t)) <= 0 {
			w.tat = nil
		}
	case isWindow(w.lim):
		c, _ := m.index(t, w.lim.Per)
		for i, n := range w.counts {
			if i < c-1 || n == 0 {
				delete(w.counts, i)
			}
		}
	default:
		live := w.log[:0]
		for _, en := range w.log {
			if en.exit > t && en.cost > 0 {
				live = append(live, en)
			}
		}
		w.log = live
	}
}

// weighted returns a sliding estimate's share of the previous window at
// t: its count times the part of t's window still to come,
// p·(W − e)/W, exact.
func (m *exact) weighted(w *mWin, t time.Duration) *big.Rat {
	c, e := m.index(t, w.lim.Per)
	p := w.counts[c-1]
	return rat(p*int64(w.lim.Per-e), int64(w.lim.Per))
}

// logUsed returns a log's cost still in the window at t.
func logUsed(w *mWin, t time.Duration) int64 {
	var u int64
	for _, en := range w.log {
		if en.exit > t {
			u += en.cost
		}
	}
	return u
}

// allows reports whether w holds cost at t.
func (m *exact) allows(w *mWin, t time.Duration, cost int64) bool {
	l := w.lim
	switch {
	case l.Algorithm == keyrate.TokenBucket:
		// max(TAT, t) + c·I − t ≤ Burst·I
		i := interval(l)
		base := ratD(t)
		if w.tat != nil && w.tat.Cmp(base) > 0 {
			base = w.tat
		}
		lhs := new(big.Rat).Add(base, new(big.Rat).Mul(rat(cost, 1), i))
		lhs.Sub(lhs, ratD(t))
		return lhs.Cmp(new(big.Rat).Mul(rat(int64(l.Burst), 1), i)) <= 0
	case l.Algorithm == keyrate.FixedWindow:
		c, _ := m.index(t, l.Per)
		return w.counts[c]+cost <= int64(l.Rate)
	case l.Algorithm == keyrate.SlidingWindow:
		c, _ := m.index(t, l.Per)
		est := new(big.Rat).Add(rat(w.counts[c]+cost, 1), m.weighted(w, t))
		return est.Cmp(rat(int64(l.Rate), 1)) <= 0
	default:
		return logUsed(w, t)+cost <= int64(l.Rate)
	}
}

// spend counts cost at t in w (which must allow it, or the spend
// overdraws as a carry's does).
func (m *exact) spend(w *mWin, t time.Duration, cost int64) {
	l := w.lim
	switch {
	case l.Algorithm == keyrate.TokenBucket:
		base := ratD(t)
		if w.tat != nil && w.tat.Cmp(base) > 0 {
			base = w.tat
		}
		w.tat = new(big.Rat).Add(base, new(big.Rat).Mul(rat(cost, 1), interval(l)))
	case isWindow(l):
		c, _ := m.index(t, l.Per)
		w.counts[c] += cost
	default:
		w.log = append(w.log, mEntry{exit: t + l.Per, cost: cost})
	}
}

// debt returns what w owes at t, in tokens (carry.md's "debt out"): a
// token bucket's tokens spent and not yet refilled, (TAT − t)/I; a
// window's count of t's window c, plus the previous window's weighted by
// the part of c still to come, rounded up, plus the counts of every
// window after c; a log's cost still in the window.
func (m *exact) debt(w *mWin, t time.Duration) *big.Rat {
	l := w.lim
	switch {
	case l.Algorithm == keyrate.TokenBucket:
		if w.tat == nil || w.tat.Cmp(ratD(t)) <= 0 {
			return new(big.Rat)
		}
		d := new(big.Rat).Sub(w.tat, ratD(t))
		return d.Quo(d, interval(l))
	case isWindow(l):
		c, _ := m.index(t, l.Per)
		d := w.counts[c] + ceilRat(m.weighted(w, t))
		for i, n := range w.counts {
			if i > c {
				d += n
			}
		}
		return rat(d, 1)
	default:
		return rat(logUsed(w, t), 1)
	}
}

// burst returns a window's Burst: its N for a window algorithm or a log.
func burst(l keyrate.Limit) int64 {
	if l.Algorithm == keyrate.TokenBucket {
		return int64(l.Burst)
	}
	return int64(l.Rate)
}

// remaining returns the largest cost w would allow at t (0 if none): the
// whole tokens a token bucket holds, what a window or log has left.
func (m *exact) remaining(w *mWin, t time.Duration) int64 {
	l := w.lim
	var r int64
	switch {
	case l.Algorithm == keyrate.TokenBucket:
		r = floorRat(new(big.Rat).Sub(rat(int64(l.Burst), 1), m.debt(w, t)))
	case l.Algorithm == keyrate.FixedWindow:
		c, _ := m.index(t, l.Per)
		r = int64(l.Rate) - w.counts[c]
	case l.Algorithm == keyrate.SlidingWindow:
		c, _ := m.index(t, l.Per)
		r = floorRat(new(big.Rat).Sub(rat(int64(l.Rate)-w.counts[c], 1), m.weighted(w, t)))
	default:
		r = int64(l.Rate) - logUsed(w, t)
	}
	return max(r, 0)
}

// refund gives cost back to w at t, capped at full (carry.md's "Refunds
// and cancels"): a token bucket's TAT moves back; a window takes it off
// its current count, then (sliding) off the previous one; a log takes it
// off its newest admissions.
func (m *exact) refund(w *mWin, t time.Duration, cost int64) {
	l := w.lim
	switch {
	case l.Algorithm == keyrate.TokenBucket:
		if w.tat == nil {
			return
		}
		w.tat = new(big.Rat).Sub(w.tat, new(big.Rat).Mul(rat(cost, 1), interval(l)))
		if w.tat.Cmp(ratD(t)) <= 0 {
			w.tat = nil
		}
	case isWindow(l):
		c, _ := m.index(t, l.Per)
		off := min(cost, w.counts[c])
		w.counts[c] -= off
		cost -= off
		if l.Algorithm == keyrate.SlidingWindow {
			w.counts[c-1] -= min(cost, w.counts[c-1])
		}
	default:
		for i := len(w.log) - 1; i >= 0 && cost > 0; i-- {
			if w.log[i].exit <= t {
				break
			}
			off := min(cost, w.log[i].cost)
			w.log[i].cost -= off
			cost -= off
		}
	}
	m.prune(w, t)
}

// debtIn returns a window of lim holding debt d as spent at t (carry.md's
// "debt in"): a token bucket whose TAT is t + d·I (exact: the stores
// round it up to a tick, which decides alike at whole-ns readings when I
// is a whole number of ns, and can only deny more otherwise); a window
// algorithm's ⌈d⌉ counted from t's window, N to a window; a log's one
// admission of ⌈d⌉ at t, in the window until t + ⌈d/N⌉·W.
func (m *exact) debtIn(lim keyrate.Limit, t time.Duration, d *big.Rat) *mWin {
	w := newWin(lim)
	if d.Sign() <= 0 {
		return w
	}
	switch {
	case lim.Algorithm == keyrate.TokenBucket:
		w.tat = new(big.Rat).Add(ratD(t), new(big.Rat).Mul(d, interval(lim)))
	case isWindow(lim):
		c, _ := m.index(t, lim.Per)
		for n := ceilRat(d); n > 0; c++ {
			k := min(n, int64(lim.Rate))
			w.counts[c] = k
			n -= k
		}
	default:
		n := ceilRat(d)
		windows := ceilRat(new(big.Rat).Quo(d, rat(int64(lim.Rate), 1)))
		w.log = []mEntry{{exit: t + time.Duration(windows)*lim.Per, cost: n}}
	}
	return w
}

// sameLimits reports whether a and b are the same limits in the same
// order. A change between them is no change: redisbucket records only
// the limits, and an in-process store, which carries the key to the new
// version anyway, carries every window exactly but a log, which it may
// only collapse (deny more).
func sameLimits(a, b []keyrate.Limit) bool { return slices.Equal(a, b) }

// length is the length carry.md matches windows by, in ns: a token
// bucket's fill time Burst·Per/Rate, a window algorithm's or a log's Per.
func length(l keyrate.Limit) *big.Rat {
	if l.Algorithm == keyrate.TokenBucket {
		return new(big.Rat).Mul(interval(l), rat(int64(l.Burst), 1))
	}
	return rat(int64(l.Per), 1)
}

// sameLength reports whether a and b have windows of one length.
func sameLength(a, b keyrate.Limit) bool { return length(a).Cmp(length(b)) == 0 }

// carry moves k's state to limits at t, as carry.md's rule says, and
// reports whether it changed anything: debt out of every old window;
// window j of the new policy owes the largest debt of the old windows of
// its length and of those whose length no new window has (or, if no old
// window has its length, of all of them); and holds it as spent at t,
// except that a fixed or sliding window keeps an old window's counts when
// that window has its algorithm and length, its counts fit the new N and
// its debt is the one carried, and a log keeps an old log of its length
// (collapsed onto the newest admission) when its cost fits the new N.
func (m *exact) carry(k *mKey, limits []keyrate.Limit, t time.Duration) bool {
	if k.limits == nil {
		k.limits = limits
		k.wins = make([]*mWin, len(limits))
		for j, l := range limits {
			k.wins[j] = newWin(l)
		}
		return true
	}
	if sameLimits(k.limits, limits) {
		return false
	}
	debts := make([]*big.Rat, len(k.wins))
	for i, w := range k.wins {
		debts[i] = m.debt(w, t)
	}
	has := func(ls []keyrate.Limit, l keyrate.Limit) bool {
		return slices.ContainsFunc(ls, func(m keyrate.Limit) bool { return sameLength(l, m) })
	}
	wins := make([]*mWin, len(limits))
	for j, l := range limits {
		d := new(big.Rat)
		matched := has(k.limits, l)
		for i, old := range k.limits {
			if !matched || sameLength(old, l) || !has(limits, old) {
				if debts[i].Cmp(d) > 0 {
					d = debts[i]
				}
			}
		}
		wins[j] = m.keep(k, l, d, debts, t)
		if wins[j] == nil {
			wins[j] = m.debtIn(l, t, d)
		}
	}
	k.limits, k.wins = limits, wins
	return true
}

// keep returns the window of l that carry.md's exceptions keep exactly for
// a new window of l owing d, or nil if none applies: the first old window
// that qualifies.
func (m *exact) keep(k *mKey, l keyrate.Limit, d *big.Rat, debts []*big.Rat, t time.Duration) *mWin {
	fits := func(i int) bool {
		old := k.wins[i]
		if old.lim.Algorithm != l.Algorithm || old.lim.Per != l.Per {
			return false
		}
		switch {
		case isWindow(l):
			if debts[i].Cmp(d) != 0 {
				return false
			}
			c, _ := m.index(t, l.Per)
			for idx, n := range old.counts {
				if idx >= c-1 && n > int64(l.Rate) {
					return false
				}
			}
			return true
		case l.Algorithm == keyrate.SlidingLog:
			return logUsed(old, t) <= int64(l.Rate)
		}
		return false
	}
	pick := -1
	for i := range k.wins {
		if fits(i) {
			pick = i
			break
		}
	}
	if pick < 0 {
		return nil
	}
	w := k.wins[pick].clone()
	w.lim = l
	m.prune(w, t)
	if l.Algorithm == keyrate.SlidingLog && len(w.log) > 0 {
		// Collapsed onto the newest admission.
		w.log = []mEntry{{exit: w.log[len(w.log)-1].exit, cost: logUsed(w, t)}}
	}
	return w
}

// key returns k's state, nil if it has none.
func (m *exact) key(name string) *mKey { return m.keys[name] }

// under returns key's state carried to limits at t (created if new), and
// whether the carry changed it. limits must not be empty.
func (m *exact) under(name string, limits []keyrate.Limit, t time.Duration) (*mKey, bool) {
	k := m.keys[name]
	if k == nil {
		k = &mKey{}
		m.keys[name] = k
	}
	return k, m.carry(k, limits, t)
}

// cloneKey returns a deep copy of k (nil for nil).
func cloneKey(k *mKey) *mKey {
	if k == nil {
		return nil
	}
	c := &mKey{limits: k.limits, wins: make([]*mWin, len(k.wins))}
	for i, w := range k.wins {
		c.wins[i] = w.clone()
	}
	return c
}

// keyAllows reports whether every window of k allows cost at t.
func (m *exact) keyAllows(k *mKey, t time.Duration, cost int64) bool {
	for _, w := range k.wins {
		if !m.allows(w, t, cost) {
			return false
		}
	}
	return true
}

// keySpend spends cost at t from every window of k.
func (m *exact) keySpend(k *mKey, t time.Duration, cost int64) {
	for _, w := range k.wins {
		m.spend(w, t, cost)
	}
}

// keyReserve spends cost from every window of k for a reservation made at
// t whose slot the store reported as s. A slot is its exact instant
// rounded up to a whole ns (see keyrate.Reservation), so a token bucket
// spends at s − 1ns: for a reservation that waited for that bucket the
// exact slot is at most its TAT, where max(TAT, slot) is TAT whatever
// the rounding, and for any other it is at most 1ns more lenient than
// the store. A window algorithm's windows start at whole ns, and it
// spends at s.
func (m *exact) keyReserve(k *mKey, t, s time.Duration, cost int64) {
	for _, w := range k.wins {
		at := s
		if w.lim.Algorithm == keyrate.TokenBucket && s > t {
			at = s - time.Nanosecond
		}
		m.spend(w, at, cost)
	}
}

// keyRemaining returns the least of k's windows' remaining at t.
func (m *exact) keyRemaining(k *mKey, t time.Duration) int64 {
	r := int64(-1)
	for _, w := range k.wins {
		if x := m.remaining(w, t); r < 0 || x < r {
			r = x
		}
	}
	return r
}

// keyRefund refunds cost to k at t as carry.md's last section says:
// nothing while any window owes more than its Burst (N for a window
// algorithm or a log), else every window gains cost, capped at full. It
// reports whether it gave anything back.
//
// What a fixed window owes here is its own: the counts of t's window and
// of the windows after it, not the previous window's weighted count that
// debt (carry.md's debt out) adds. carry.md does not say, but its reason
// ("those tokens are promised to a reservation's slot or owed from a
// carry") fits only this reading, under which the model gives back more
// often (the lenient one of the two): with the previous window's share,
// a refund right after a fixed window's boundary would give nothing back
// whenever the two windows together passed N.
func (m *exact) keyRefund(k *mKey, t time.Duration, cost int64) bool {
	for _, w := range k.wins {
		d := m.debt(w, t)
		if w.lim.Algorithm == keyrate.FixedWindow {
			d.Sub(d, rat(ceilRat(m.weighted(w, t)), 1))
		}
		if d.Cmp(rat(burst(w.lim), 1)) > 0 {
			return false
		}
	}
	before := cloneKey(k)
	for _, w := range k.wins {
		m.refund(w, t, cost)
	}
	return !m.equalKeys(before, k, t)
}

// equalKeys reports whether a and b decide alike from t on: the same
// limits and, pruned at t, the same windows.
func (m *exact) equalKeys(a, b *mKey, t time.Duration) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !sameLimits(a.limits, b.limits) {
		return false
	}
	for i := range a.wins {
		x, y := a.wins[i].clone(), b.wins[i].clone()
		m.prune(x, t)
		m.prune(y, t)
		switch {
		case (x.tat == nil) != (y.tat == nil), x.tat != nil && x.tat.Cmp(y.tat) != 0:
			return false
		case len(x.counts) != len(y.counts), !slices.Equal(x.log, y.log):
			return false
		}
		for idx, n := range x.counts {
			if y.counts[idx] != n {
				return false
			}
		}
	}
	return true
}
