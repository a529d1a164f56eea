package conformance_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// boundStore is an in-process store as FuzzPolicyBound drives it.
type boundStore interface {
	keyrate.WaitLimiter
	keyrate.BoundedLimiter
}

// boundAdmission is one admission of a key, as FuzzPolicyBound counts it:
// cost at the reading (or, for a reservation, the slot) at. Refunds take
// cost off the latest admissions, cancels off their own.
type boundAdmission struct {
	at   time.Duration
	cost int
}

// boundErrors are the errors FuzzPolicyBound requires every store to
// agree on.
var boundErrors = []error{keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst, keyrate.ErrUnknownPolicy, keyrate.ErrStoreFull, keyrate.ErrInvalidPolicy}

// errClass names which of boundErrors err wraps ("" for nil).
func errClass(err error) string {
	if err == nil {
		return ""
	}
	for _, e := range boundErrors {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other: " + err.Error()
}

// loose is a bound that holds for a key however it moved between policies
// and however they changed: the largest burst of any window 0 it was ever
// under (a window algorithm's N counting twice, since an interval across
// a window boundary sees two windows' worth), plus the fastest rate of any
// of them times the interval. A key's window 0 carries its debt whole
// through every move, so no move lets it pass that.
type loose struct {
	burst    int
	num, den int64 // the fastest rate: num tokens per den ns
}

func (l *loose) add(lim keyrate.Limit) {
	b := lim.Burst
	if lim.Algorithm != keyrate.TokenBucket {
		b = 2 * lim.Rate
	}
	l.burst = max(l.burst, b)
	if l.den == 0 || int64(lim.Rate)*l.den > l.num*int64(lim.Per) {
		l.num, l.den = int64(lim.Rate), int64(lim.Per)
	}
}

// checkIntervals fails unless, for every pair of admissions (sorted by
// reading) i ≤ j, the cost admitted in [at_i, at_j] is at most burst +
// num·(at_j − at_i + slack)/den.
func checkIntervals(t *testing.T, what func() string, adm []boundAdmission, burst int, num, den int64, slack time.Duration) {
	t.Helper()
	sorted := slices.Clone(adm)
	slices.SortStableFunc(sorted, func(a, b boundAdmission) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	for i := range sorted {
		sum := 0
		for j := i; j < len(sorted); j++ {
			sum += sorted[j].cost
			span := int64(sorted[j].at-sorted[i].at) + int64(slack)
			if int64(sum)*den > int64(burst)*den+num*span {
				t.Fatalf("%s: %d admitted in [%v, %v], above %d + %d·%v/%v", what(), sum, sorted[i].at, sorted[j].at, burst, num, time.Duration(span), time.Duration(den))
			}
		}
	}
}

// FuzzPolicyBound drives every in-process store through one sequence of
// spends (by the key's policy, and by tier, which moves the key to that
// tier until its next call by policy), refunds (of any cost, spent or
// not, invalid ones too), reservations and their cancels (twice, late,
// after moves), moves of keys between a loose policy, a tight one, one of
// two windows, a fixed window and an unlimited one, changes of those
// policies at runtime, sweeps, peeks and the clock moving on, and checks
// two things:
//
//   - the stores decide every call alike (decisions, errors, reservations'
//     OK, slot and delay, cancels' results);
//   - for every store and key, at every step, the admissions (at their
//     readings, or their slots for reservations), net of refunds (taken
//     off the latest admissions) and cancels, keep each window's bound over
//     every interval for a key that never left the default policy, nor saw
//     it change, and the loose bound (see loose) on window 0 for every key,
//     plus the cost of its reservations that were pending across a move
//     (keyrate.PolicyLimiter's documented exception: a carry refills their
//     tokens from then, while they keep their slots).
//
// The clock only moves forwards: a clock stepped back across a move to a
// faster rate mints (TestBugStaleCarryToFasterRateMintsClockBack), which
// this target found when it stepped back too.
func FuzzPolicyBound(f *testing.F) {
	f.Add([]byte{2, 1, 3, 0, 3, 0, 10, 2, 5, 1, 3, 0, 40, 0, 9, 0, 3, 0})
	f.Add([]byte{4, 3, 5, 2, 2, 200, 2, 2, 100, 3, 0, 0, 60, 1, 0, 0, 3, 0, 70, 5, 9})
	f.Add([]byte{1, 0, 1, 4, 1, 0, 0, 5, 0, 1, 5, 0, 8, 2, 0, 7, 0, 90, 0, 5, 0, 14, 3, 0, 0, 5, 0})
	f.Add([]byte{3, 2, 2, 42, 3, 0, 0, 2, 0, 2, 2, 250, 41, 1, 0, 3, 0, 0, 59, 3, 1, 0, 2, 0, 6, 0, 30, 0, 2, 0})
	f.Add([]byte{0, 0, 0, 2, 6, 255, 12, 6, 255, 22, 6, 255, 3, 0, 0, 13, 0, 0, 7, 0, 120, 0, 6, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		if len(data) > 3+3*80 {
			data = data[:3+3*80]
		}
		policies := map[string]keyrate.Policy{
			keyrate.DefaultPolicy: {Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{{Rate: 1 + int(data[0]%5), Per: time.Duration(1+data[1]%4) * 100 * time.Millisecond, Burst: 1 + int(data[2]%6)}}},
			"tight":               {Name: "tight", Limits: []keyrate.Limit{{Rate: 1, Per: 300 * time.Millisecond, Burst: 2}}},
			"two": {Name: "two", Limits: []keyrate.Limit{
				{Rate: 2, Per: 100 * time.Millisecond, Burst: 3},
				{Rate: 1 + int(data[0]%3), Per: time.Second, Burst: 4 + int(data[2]%4)},
			}},
			"fixed": {Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: 500 * time.Millisecond}.Using(keyrate.FixedWindow)}},
			"free":  keyrate.Unlimited("free"),
		}
		names := []string{"", "tight", "two", "fixed", "free"}
		keys := []string{"a", "b", "c"}
		policyOf := map[string]string{}

		clk := clock.NewManual(time.Hour)
		var named []keyrate.Policy
		for _, n := range names[1:] {
			named = append(named, policies[n])
		}
		opts := []keyrate.Option{
			keyrate.WithClock(clk),
			keyrate.WithPolicies(named...),
			keyrate.WithPolicyFunc(func(key string) string { return policyOf[key] }),
		}
		var ls []boundStore
		for _, s := range stores {
			l, err := s.new(policies[keyrate.DefaultPolicy].Limits[0], opts...)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l.(boundStore))
		}
		type keyModel struct {
			adm   []boundAdmission
			pure  bool
			loose loose
			extra int // the cost of reservations pending across a move (see keyrate.PolicyLimiter)
		}
		models := make([]map[string]*keyModel, len(ls))
		for j := range ls {
			models[j] = map[string]*keyModel{}
			for _, k := range keys {
				m := &keyModel{pure: true}
				m.loose.add(policies[keyrate.DefaultPolicy].Limits[0])
				models[j][k] = m
			}
		}
		type held struct {
			r       keyrate.Reservation
			adm     int  // index in the key's admissions, -1 if none
			crossed bool // pending when its key moved: counted in extra
		}
		resv := make([][]held, len(ls))
		policyOfKey := func(k string) keyrate.Policy {
			n := policyOf[k]
			if n == "" {
				n = keyrate.DefaultPolicy
			}
			return policies[n]
		}
		// check checks key k's bounds: only the key of an operation gains
		// admissions (a cancel or refund only takes them away, and a change
		// of policy only loosens the loose bound).
		check := func(step int, k string) {
			for j := range ls {
				m := models[j][k]
				what := func(bound string) func() string {
					return func() string { return fmt.Sprintf("step %d, store %s, key %s, %s", step, stores[j].name, k, bound) }
				}
				if m.pure {
					for w, lim := range policyOfKey(k).Limits {
						if lim.Algorithm == keyrate.TokenBucket {
							// A nanosecond of slack: a slot is its tick rounded up to
							// the nanosecond (see keyrate.Reservation).
							checkIntervals(t, what(fmt.Sprintf("window %d (%v)", w, lim)), m.adm, lim.Burst, int64(lim.Rate), int64(lim.Per), time.Nanosecond)
						}
					}
				}
				checkIntervals(t, what("the loose bound on window 0"), m.adm, m.loose.burst+m.extra, m.loose.num, m.loose.den, time.Nanosecond)
			}
		}
		admit := func(j int, k string, at time.Duration, cost int, p keyrate.Policy) int {
			m := models[j][k]
			if p.Unlimited { // counts nothing
				return -1
			}
			m.adm = append(m.adm, boundAdmission{at: at, cost: cost})
			return len(m.adm) - 1
		}
		refund := func(j int, k string, cost int) {
			m := models[j][k]
			for i := len(m.adm) - 1; i >= 0 && cost > 0; i-- {
				c := min(cost, m.adm[i].cost)
				m.adm[i].cost -= c
				cost -= c
			}
		}
		// moved notes a possible move of key k at reading now: its
		// reservations whose slots have not come keep them, and the new
		// policy refills their tokens from the carry on, so the key may be
		// admitted up to their cost more, once each (the documented
		// exception of keyrate.PolicyLimiter).
		moved := func(k string, now time.Duration) {
			for j := range ls {
				for i := range resv[j] {
					if h := &resv[j][i]; h.r.Key() == k && h.adm >= 0 && !h.crossed && h.r.At() > now {
						h.crossed = true
						models[j][k].extra += h.r.Cost()
					}
				}
			}
		}
		var trace []string // the operations so far, logged if the target fails
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("operations:\n%s", strings.Join(trace, "\n"))
			}
		})
		for i, b := 0, data[3:]; len(b) >= 3; i, b = i+1, b[3:] {
			kind, k := b[0]%10, keys[int(b[0]/10)%len(keys)]
			cost := int(b[1] % 7)
			if cost == 0 {
				cost = []int{0, -1, math.MaxInt}[int(b[1]/7)%3]
			}
			now := clk.Now()
			trace = append(trace, fmt.Sprintf("op %d at %v: kind %d key %s cost %d b1 %d b2 %d policy %q", i, now-time.Hour, kind, k, cost, b[1], b[2], policyOf[k]))
			switch kind {
			case 0: // AllowN
				var first keyrate.Decision
				var firstErr error
				for j, l := range ls {
					d, err := l.AllowN(k, cost)
					if j == 0 {
						first, firstErr = d, err
					} else if d != first || errClass(err) != errClass(firstErr) {
						t.Fatalf("op %d AllowN(%q, %d) at %v: %s = %+v, %v; %s = %+v, %v", i, k, cost, now, stores[j].name, d, err, stores[0].name, first, firstErr)
					}
					if err == nil && d.Allowed {
						admit(j, k, now, cost, policyOfKey(k))
					}
				}
			case 1: // AllowTier under any policy: the key moves to it, and back at its next call by policy
				name := names[int(b[2])%len(names)]
				p := policies[keyrate.DefaultPolicy]
				if name != "" {
					p = policies[name]
				}
				moved(k, now)
				var first keyrate.Decision
				var firstErr error
				for j, l := range ls {
					tier, err := l.Tier(p.Name)
					if err != nil {
						t.Fatal(err)
					}
					d, err := l.AllowTier(k, tier, cost)
					if j == 0 {
						first, firstErr = d, err
					} else if d != first || errClass(err) != errClass(firstErr) {
						t.Fatalf("op %d AllowTier(%q, %s, %d) at %v: %s = %+v, %v; %s = %+v, %v", i, k, p.Name, cost, now, stores[j].name, d, err, stores[0].name, first, firstErr)
					}
					m := models[j][k]
					if p.Name != policyOfKey(k).Name {
						m.pure = false
					}
					if len(p.Limits) > 0 {
						m.loose.add(p.Limits[0])
					}
					if err == nil && d.Allowed {
						admit(j, k, now, cost, p)
					}
				}
			case 2: // Refund
				var firstErr error
				for j, l := range ls {
					err := l.Refund(k, cost)
					if j == 0 {
						firstErr = err
					} else if errClass(err) != errClass(firstErr) {
						t.Fatalf("op %d Refund(%q, %d): %s = %v; %s = %v", i, k, cost, stores[j].name, err, stores[0].name, firstErr)
					}
					if err == nil && len(policyOfKey(k).Limits) > 0 {
						refund(j, k, cost)
					}
				}
			case 3: // Reserve
				wait := time.Duration(b[2]) * 10 * time.Millisecond
				if b[2] == 255 {
					wait = math.MaxInt64
				}
				var first keyrate.Reservation
				var firstErr error
				for j, l := range ls {
					r, err := l.Reserve(k, cost, wait)
					if err == nil && r.Delay() < 0 {
						t.Fatalf("op %d: %s Reserve(%q, %d, %v) has a negative delay %v", i, stores[j].name, k, cost, wait, r.Delay())
					}
					if err == nil && r.OK() && r.Delay() > wait {
						t.Fatalf("op %d: %s Reserve(%q, %d, %v) waits %v, past its maximum wait", i, stores[j].name, k, cost, wait, r.Delay())
					}
					if j == 0 {
						first, firstErr = r, err
					} else if errClass(err) != errClass(firstErr) || r.OK() != first.OK() || r.At() != first.At() || r.Delay() != first.Delay() {
						t.Fatalf("op %d Reserve(%q, %d, %v) at %v: %s = OK %v at %v delay %v, %v; %s = OK %v at %v delay %v, %v", i, k, cost, wait, now,
							stores[j].name, r.OK(), r.At(), r.Delay(), err, stores[0].name, first.OK(), first.At(), first.Delay(), firstErr)
					}
					if err == nil && r.OK() {
						resv[j] = append(resv[j], held{r: r, adm: admit(j, k, r.At(), cost, policyOfKey(k))})
					}
				}
			case 4: // Cancel
				var first bool
				for j := range ls {
					if len(resv[j]) == 0 {
						continue
					}
					h := resv[j][int(b[1])%len(resv[j])]
					got := h.r.Cancel()
					if j == 0 {
						first = got
					} else if len(resv[j]) == len(resv[0]) && got != first {
						t.Fatalf("op %d Cancel of reservation %d: %s = %v; %s = %v", i, int(b[1])%len(resv[j]), stores[j].name, got, stores[0].name, first)
					}
					if got && h.adm >= 0 {
						models[j][h.r.Key()].adm[h.adm].cost = 0
					}
				}
			case 5: // move the key to another policy
				moved(k, now)
				policyOf[k] = names[int(b[1])%len(names)]
				p := policyOfKey(k)
				for j := range ls {
					m := models[j][k]
					m.pure = m.pure && p.Name == keyrate.DefaultPolicy
					if len(p.Limits) > 0 {
						m.loose.add(p.Limits[0])
					}
				}
			case 6: // change a policy at runtime
				n := names[int(b[1])%4]
				if n == "" {
					n = keyrate.DefaultPolicy
				}
				p := policies[n]
				p.Limits = slices.Clone(p.Limits)
				l0 := &p.Limits[0]
				if l0.Algorithm == keyrate.TokenBucket {
					l0.Rate, l0.Burst = 1+int(b[2]%4), 1+int(b[2]/4%6)
				} else {
					l0.Rate, l0.Burst = 1+int(b[2]%5), 1+int(b[2]%5)
				}
				for j, l := range ls {
					if err := l.SetPolicy(p); err != nil {
						t.Fatalf("op %d: %s SetPolicy(%v): %v", i, stores[j].name, p, err)
					}
				}
				policies[n] = p
				for _, key := range keys {
					if policyOfKey(key).Name == n {
						moved(key, now)
						for j := range ls {
							models[j][key].pure = false
							models[j][key].loose.add(*l0)
						}
					}
				}
			case 7: // sweep
				for _, l := range ls {
					l.Sweep()
				}
			case 8: // peek
				var first keyrate.Decision
				for j, l := range ls {
					d := l.Peek(k)
					if j == 0 {
						first = d
					} else if d != first {
						t.Fatalf("op %d Peek(%q) at %v: %s = %+v; %s = %+v", i, k, now, stores[j].name, d, stores[0].name, first)
					}
				}
			case 9: // the clock
				clk.Advance(time.Duration(b[2]) * 7 * time.Millisecond)
			}
			if kind != 9 && b[2]%3 == 0 {
				clk.Advance(time.Duration(b[2]) * time.Millisecond)
			}
			check(i, k)
		}
	})
}
