package conformance

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/keyrate/keyrate"
)

// This file is CarryModel's checks of each operation against the model
// (carrymodel.go) and of each key's admissions against the interval
// bounds.

// orNone names an error class, "none" for "".
func orNone(class string) string {
	if class == "" {
		return "none"
	}
	return class
}

// describe returns k's windows at t as the model sees them, for failures.
func (m *exact) describe(k *mKey, t time.Duration) string {
	if k == nil || k.limits == nil {
		return "no state (full)"
	}
	var parts []string
	for _, w := range k.wins {
		parts = append(parts, fmt.Sprintf("[%v: owes %s, remaining %d]", w.lim, m.debt(w, t).FloatString(3), m.remaining(w, t)))
	}
	return strings.Join(parts, " ")
}

// under returns key's model state carried to p's limits at now, and
// records the request in key's book; a move (the key had another state)
// marks its pending reservations as crossed (carry.md, "The exceptions
// that remain").
func (r *carryRun) under(key string, p keyrate.Policy, now time.Duration) *mKey {
	had := r.m.key(key) != nil && r.m.key(key).limits != nil
	k, changed := r.m.under(key, p.Limits, now)
	b := r.book(key)
	b.reqs = append(b.reqs, p.Limits)
	if had && changed {
		for _, h := range r.resv {
			if h.key == key && !h.cancelled && !h.crossed && h.slot > now {
				h.crossed = true
				b.extra += h.cost
			}
		}
	}
	return k
}

// request checks one request of cost for key under p, by member mem, and
// records what the stores admitted: outs are the stores' outcomes, their
// reservations' slots in at (reserve: a Reserve or Wait).
func (r *carryRun) request(i int, what, key string, mem int, p keyrate.Policy, cost int, reserve bool, outs []outcome) {
	want := r.predict(p, cost, reserve)
	now := r.clk.Now()
	for s, o := range outs {
		if got := carryErr(o.err); got != want {
			r.fail(i, "%s: %s returned %s; the model expects %s", what, r.stores[s].Name, orNone(got), orNone(want))
		}
	}
	agree := func() {
		for s, o := range outs {
			if !o.same(outs[0]) {
				r.fail(i, "%s: %s = %s; %s = %s", what, r.stores[s].Name, o, r.stores[0].Name, outs[0])
			}
		}
	}
	if want != "" {
		agree()
		return
	}
	if p.Unlimited {
		for s, o := range outs {
			if !o.ok || o.at != now {
				r.fail(i, "%s: %s = %s, under an unlimited policy", what, r.stores[s].Name, o)
			}
		}
		agree()
		return
	}
	k := r.under(key, p, now)
	c := int64(cost)
	var over []string
	for s, o := range outs {
		if o.ok && !r.m.keyAllows(k, o.at, c) {
			over = append(over, fmt.Sprintf("%s admitted %d at %v", r.stores[s].Name, cost, o.at-r.start))
		}
	}
	if over != nil {
		r.fail(i, "%s: %s, which the model denies: %s", what, strings.Join(over, ", "), r.m.describe(k, outs[0].at))
	}
	agree()
	o := outs[0]
	if r.m.keyAllows(k, now, c) {
		r.allowed++
		if !o.ok || o.at != now {
			r.denied++
		}
	}
	if !o.ok {
		return
	}
	before := cloneKey(k)
	r.m.keyReserve(k, now, o.at, c)
	b := r.book(key)
	b.adm = append(b.adm, carryAdmission{at: o.at, cost: c, req: len(b.reqs) - 1})
	if o.res.OK() {
		h := &carryReservation{key: key, cost: c, slot: o.at, before: before, after: cloneKey(k), adm: len(b.adm) - 1}
		for _, o := range outs {
			h.rs = append(h.rs, o.res)
		}
		r.resv = append(r.resv, h)
	}
	if !reserve {
		if rem := r.m.keyRemaining(k, now); int64(o.d.Remaining) > rem {
			r.fail(i, "%s: Remaining %d, above the model's %d: %s", what, o.d.Remaining, rem, r.m.describe(k, now))
		}
	}
	r.checkBounds(i, key, len(b.adm)-1)
}

// peek checks a Peek of key under p, by member mem, that answered d: it
// reports no more than the model (carried to p on a copy: a Peek stores
// nothing), and, at the reading of the key's last Peek under the same
// limits by the same member, with no refund or cancel since, no more than
// that Peek did.
func (r *carryRun) peek(i int, key string, mem int, p keyrate.Policy, d keyrate.Decision) {
	now := r.clk.Now()
	if p.Unlimited {
		if !d.Allowed || d.Remaining != math.MaxInt {
			r.fail(i, "Peek(%s) under an unlimited policy: %+v", key, d)
		}
		return
	}
	k := cloneKey(r.m.key(key))
	if k == nil {
		k = &mKey{}
	}
	r.m.carry(k, p.Limits, now)
	if rem := r.m.keyRemaining(k, now); int64(d.Remaining) > rem {
		r.fail(i, "Peek(%s) under %q reports Remaining %d, above the model's %d: %s", key, p.Name, d.Remaining, rem, r.m.describe(k, now))
	}
	if d.Allowed && !r.m.keyAllows(k, now, 1) {
		r.fail(i, "Peek(%s) under %q reports a cost of 1 allowed, which the model denies: %s", key, p.Name, r.m.describe(k, now))
	}
	last := r.peeks[key]
	if last != nil && last.at == now && last.member == mem && sameLimits(last.limits, p.Limits) {
		if d.Remaining > last.remaining {
			r.fail(i, "Peek(%s) under %q reports Remaining %d, above the %d it reported at this reading before the requests since: a round trip minted %d",
				key, p.Name, d.Remaining, last.remaining, d.Remaining-last.remaining)
		}
		return
	}
	r.peeks[key] = &carryPeek{at: now, member: mem, limits: p.Limits, remaining: d.Remaining}
}

// refund checks a refund of cost to key under p that returned errs, and
// gives it back in the model (carry.md, "Refunds and cancels"); the
// book takes it off the key's latest admissions.
func (r *carryRun) refund(i int, key string, p keyrate.Policy, cost int, errs []error) {
	want := r.predict(p, cost, false)
	for s, err := range errs {
		if got := carryErr(err); got != want {
			r.fail(i, "Refund(%s, %d) under %q: %s returned %s; the model expects %s", key, cost, p.Name, r.stores[s].Name, orNone(got), orNone(want))
		}
	}
	if want != "" || p.Unlimited {
		return
	}
	now := r.clk.Now()
	k := r.under(key, p, now)
	r.m.keyRefund(k, now, int64(cost))
	delete(r.peeks, key)
	b := r.book(key)
	c := int64(cost)
	for j := len(b.adm) - 1; j >= 0 && c > 0; j-- {
		off := min(c, b.adm[j].cost)
		b.adm[j].cost -= off
		c -= off
	}
}

// cancel checks the stores' Cancel of h, which returned got: they agree,
// and a Cancel that gave back is one of a reservation whose slot has not
// come, not given back before, whose key's state in the model is still
// the one it left; the model then undoes it.
func (r *carryRun) cancel(i int, h *carryReservation, got []bool) {
	for s := range got {
		if got[s] != got[0] {
			r.fail(i, "Cancel of %s's reservation at %v: %s = %v; %s = %v", h.key, h.slot-r.start, r.stores[s].Name, got[s], r.stores[0].Name, got[0])
		}
	}
	if !got[0] {
		return
	}
	now := r.clk.Now()
	switch {
	case h.cancelled:
		r.fail(i, "Cancel of %s's reservation at %v gave its tokens back a second time", h.key, h.slot-r.start)
	case h.slot <= now:
		r.fail(i, "Cancel of %s's reservation at %v gave its tokens back after its slot", h.key, h.slot-r.start)
	case !r.m.equalKeys(r.m.key(h.key), h.after, now):
		r.fail(i, "Cancel of %s's reservation at %v gave its tokens back though the key's state changed since: it left %s; it is now %s",
			h.key, h.slot-r.start, r.m.describe(h.after, now), r.m.describe(r.m.key(h.key), now))
	}
	r.m.keys[h.key] = cloneKey(h.before)
	h.cancelled = true
	r.book(h.key).adm[h.adm].cost = 0
	delete(r.peeks, h.key)
}

// reqLoose returns the loose bound's terms for a request under limits:
// its largest Burst (2N for a window algorithm or a log) and its fastest
// rate, num tokens per den ns.
func reqLoose(limits []keyrate.Limit) (b, num, den int64) {
	for _, l := range limits {
		lb := int64(l.Burst)
		if l.Algorithm != keyrate.TokenBucket {
			lb = 2 * int64(l.Rate)
		}
		b = max(b, lb)
		if den == 0 || int64(l.Rate)*den > num*int64(l.Per) {
			num, den = int64(l.Rate), int64(l.Per)
		}
	}
	return b, num, den
}

// within reports whether sum ≤ b + num·span/den, in 128 bits: sum·den ≤
// b·den + num·span, all non-negative.
func within(sum, b, num, den, span int64) bool {
	lh, ll := bits.Mul64(uint64(sum), uint64(den))
	bh, bl := bits.Mul64(uint64(b), uint64(den))
	nh, nl := bits.Mul64(uint64(num), uint64(span))
	rl, carry := bits.Add64(bl, nl, 0)
	rh, _ := bits.Add64(bh, nh, carry)
	return lh < rh || lh == rh && ll <= rl
}

// checkBounds checks key's admissions over every interval that holds its
// admission x (the one just made: every other interval was checked when
// its latest admission was made, and refunds and cancels only take
// admissions away): the loose bound over the policies of the requests
// that made the interval's admissions and every request between them,
// and each token-bucket limit's own bound where all those requests were
// under a policy with it; each plus the cost of the key's reservations
// pending across a move, and a nanosecond of slack (a slot is its tick
// rounded up to the nanosecond).
func (r *carryRun) checkBounds(i int, key string, x int) {
	b := r.books[key]
	order := make([]int, len(b.adm))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(p, q int) int {
		switch {
		case b.adm[p].at < b.adm[q].at:
			return -1
		case b.adm[p].at > b.adm[q].at:
			return 1
		}
		return 0
	})
	pos := slices.Index(order, x)
	n := len(b.reqs)
	// The loose terms of every range of requests [lo, hi].
	type terms struct{ b, num, den int64 }
	loose := make([][]terms, n)
	for lo := range n {
		loose[lo] = make([]terms, n)
		var cur terms
		for hi := lo; hi < n; hi++ {
			rb, num, den := reqLoose(b.reqs[hi])
			cur.b = max(cur.b, rb)
			if cur.den == 0 || num*cur.den > cur.num*den {
				cur.num, cur.den = num, den
			}
			loose[lo][hi] = cur
		}
	}
	// Each token-bucket limit of a request, and how many of the first r
	// requests lack it.
	var lims []keyrate.Limit
	var lack [][]int
	for _, ls := range b.reqs {
		for _, l := range ls {
			if l.Algorithm == keyrate.TokenBucket && !slices.Contains(lims, l) {
				lims = append(lims, l)
				row := make([]int, n+1)
				for q, rq := range b.reqs {
					row[q+1] = row[q]
					if !slices.Contains(rq, l) {
						row[q+1]++
					}
				}
				lack = append(lack, row)
			}
		}
	}
	const slack = int64(time.Nanosecond)
	for lo := pos; lo >= 0; lo-- {
		a := b.adm[order[lo]]
		sum := int64(0)
		rmin, rmax := n, -1
		for j := lo; j < len(order); j++ {
			c := b.adm[order[j]]
			sum += c.cost
			rmin, rmax = min(rmin, c.req), max(rmax, c.req)
			if j < pos {
				continue
			}
			span := int64(c.at-a.at) + slack
			lt := loose[rmin][rmax]
			if !within(sum, lt.b+b.extra, lt.num, lt.den, span) {
				r.fail(i, "key %s: %d admitted in [%v, %v], above the loose bound %d + %d·%v/%v (plus %d pending across moves)",
					key, sum, a.at-r.start, c.at-r.start, lt.b, lt.num, time.Duration(span), time.Duration(lt.den), b.extra)
			}
			for q, l := range lims {
				if lack[q][rmax+1]-lack[q][rmin] == 0 && !within(sum, int64(l.Burst)+b.extra, int64(l.Rate), int64(l.Per), span) {
					r.fail(i, "key %s: %d admitted in [%v, %v] under policies that all have %v, above its bound %d + %d·%v/%v (plus %d pending across moves)",
						key, sum, a.at-r.start, c.at-r.start, l, l.Burst, l.Rate, time.Duration(span), l.Per, b.extra)
				}
			}
		}
	}
}
