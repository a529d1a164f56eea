package conformance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// multiLimits are the tiers of FuzzAllowAllModel's keys, key i under
// multiLimits[i]: token buckets whose token interval is a whole number of
// nanoseconds, so that the model below decides them exactly.
var multiLimits = []keyrate.Limit{
	{Rate: 2, Per: time.Second, Burst: 3},
	{Rate: 1, Per: time.Second, Burst: 2},
	{Rate: 5, Per: time.Second, Burst: 5},
}

// multiModel is an independent model of one token bucket per key, written
// the textbook way: tokens (scaled by Per, so whole numbers) refilled by
// the time elapsed and capped at Burst, rather than keyrate's theoretical
// arrival time.
type multiModel struct {
	tok  [3]int64 // tokens·Per
	last time.Duration
}

func (m *multiModel) refill(now time.Duration) {
	for i, l := range multiLimits {
		m.tok[i] = min(m.tok[i]+int64(now-m.last)*int64(l.Rate), int64(l.Burst)*int64(l.Per))
	}
	m.last = now
}

// whole returns key i's whole tokens.
func (m *multiModel) whole(i int) int { return int(m.tok[i] / int64(multiLimits[i].Per)) }

// retry returns the time until key i holds cost, rounded up.
func (m *multiModel) retry(i, cost int) time.Duration {
	l := multiLimits[i]
	short := int64(cost)*int64(l.Per) - m.tok[i]
	if short <= 0 {
		return 0
	}
	return time.Duration((short + int64(l.Rate) - 1) / int64(l.Rate))
}

// MultiKeySeeds are sequences for MultiKeyModel: a fuzz target's seeds,
// and the cases a store outside this module's fuzzing runs.
var MultiKeySeeds = [][]byte{
	{1, 7, 1, 1, 1, 1, 7, 1, 1, 1, 1, 7, 2, 2, 2},
	{1, 3, 0, 2, 3, 0, 5, 1, 5, 3, 3, 1, 1, 3, 2, 0, 0, 4, 1, 6, 3, 3, 3},
	{3, 1, 2, 3, 2, 1, 1, 6, 1, 1, 0, 3, 1, 6, 1, 1, 0, 2, 1, 6, 2, 2, 0},
	{1, 5, 1, 3, 0, 7, 1, 7, 0, 3, 3, 2, 0, 0, 9, 1, 7, 1, 1, 1},
}

// MultiKeyModel drives m's AllowAll, single AllowTier calls, clock steps
// and sweeps (on a store that bounds its memory) as ops says, and checks
// each answer, and every key's tokens after it, against multiModel: the
// request is allowed only if every key holds its cost, and then spends it
// from every key; a denied request, or one refused for a cost above a
// key's Burst, spends from none (keyrate.AllowAll inside an in-process
// store spends and undoes exactly: no call runs between, so every undo
// puts the key back, and the model's rule is unchanged). The key named
// is, for an atomic AllowAll and for keyrate.AllowAll inside an
// in-process store (internal/multi), the first key above its Burst (an
// error), else the key that lacks its cost with the longest wait (the
// first of those), else
// the one left with the fewest tokens (the first of those); for
// keyrate.AllowAll's checks in turn, the key it decides first when one
// lacks its cost (the checked key, all but the last, with the least to
// spare, if that lacks its cost; else the last), or else the one left
// with the fewest tokens. Which path a call takes depends on whether the
// store still holds every key, which its own evictions change, so for
// keyrate.AllowAll either answer, each exact, passes. A store that
// charged a denied request to any key, or admitted past a key's bound,
// disagrees with the model at once.
func MultiKeyModel(t *testing.T, m MultiKey, ops []byte) {
	pls := make([]keyrate.Policy, len(multiLimits))
	for i, l := range multiLimits {
		pls[i] = keyrate.Policy{Name: "t" + string(rune('0'+i)), Limits: []keyrate.Limit{l}}
	}
	pl, clk := m.Open(t, keyrate.PerHour(1), pls...)
	var tiers [3]keyrate.Tier
	for i := range tiers {
		tiers[i], _ = pl.Tier(pls[i].Name)
	}
	keys := [3]string{"k0", "k1", "k2"}
	mod := multiModel{last: clk.Now()}
	for i, l := range multiLimits {
		mod.tok[i] = int64(l.Burst) * int64(l.Per) // a new key is full
	}
	next := func() int {
		if len(ops) == 0 {
			return 0
		}
		b := ops[0]
		ops = ops[1:]
		return int(b)
	}
	for step := 0; len(ops) > 0; step++ {
		switch op := next(); op % 4 {
		case 0: // a clock step of 0 to 1.5s, by 100ms
			clk.Advance(time.Duration(next()%16) * 100 * time.Millisecond)
		case 1, 2: // AllowAll on a non-empty subset, in a chosen order, costs 1 to 3
			mask, rot := next()%7+1, next()%3
			var ks []keyrate.KeyCost
			var idx []int
			for j := range 3 {
				if i := (j + rot) % 3; mask&(1<<i) != 0 {
					ks = append(ks, keyrate.KeyCost{Key: keys[i], Tier: tiers[i], Cost: next()%3 + 1})
					idx = append(idx, i)
				}
			}
			mod.refill(clk.Now())
			spare := func(j int) int { return mod.whole(idx[j]) - ks[j].Cost }
			// predict returns the key named, and whether the call is an
			// error. Checks in turn (keyrate.AllowAll's generic path): the
			// checked key (all but the last) with the least to spare, the
			// first of those, if it lacks its cost; else the last key, if
			// it lacks its cost; else the key left with the fewest tokens
			// (the least to spare), the first of those. All at once (an
			// atomic call, and an in-process store's own path, which
			// spends in the caller's order and undoes on a deny): the
			// first key above its Burst (an error), else, of the keys that
			// lack their cost, the one with the longest wait (the first of
			// those), else that one.
			predict := func(atOnce bool) (decider int, over bool) {
				for j := range ks {
					if spare(j) < spare(decider) {
						decider = j
					}
				}
				last := len(ks) - 1
				switch {
				case atOnce:
					longest := time.Duration(0)
					for j := range ks {
						if w := mod.retry(idx[j], ks[j].Cost); spare(j) < 0 && w > longest {
							decider, longest = j, w
						}
					}
					for j := last; j >= 0; j-- {
						if ks[j].Cost > multiLimits[idx[j]].Burst {
							decider, over = j, true
						}
					}
				case spare(decider) < 0:
					checked := 0
					for j := range last {
						if spare(j) < spare(checked) {
							checked = j
						}
					}
					decider = last
					if last > 0 && spare(checked) < 0 {
						decider = checked
					}
				}
				return decider, over || ks[decider].Cost > multiLimits[idx[decider]].Burst
			}
			d, err := m.allowAll(pl, ks)
			// check returns what the call should have answered, or "" if
			// it did.
			check := func(decider int, over bool) string {
				di, dc := idx[decider], ks[decider].Cost
				switch {
				case over:
					if !errors.Is(err, keyrate.ErrCostExceedsBurst) {
						return fmt.Sprintf("ErrCostExceedsBurst from key %d", decider)
					}
				case mod.whole(di) < dc:
					want := keyrate.Decision{Policy: pls[di].Name, Limit: multiLimits[di], Remaining: mod.whole(di), RetryAfter: mod.retry(di, dc)}
					if err != nil || d.Allowed || d.Index != decider || d.Policy != want.Policy || d.Remaining != want.Remaining || d.RetryAfter != want.RetryAfter {
						return fmt.Sprintf("denied by key %d: %+v", decider, want)
					}
				default:
					if err != nil || !d.Allowed || d.Index != decider || d.Remaining != mod.whole(di)-dc || d.Policy != pls[di].Name {
						return fmt.Sprintf("allowed, key %d left with %d", decider, mod.whole(di)-dc)
					}
				}
				return ""
			}
			// keyrate.AllowAll on an in-process store takes the store's own
			// path where the store holds every key under its tier (which
			// its own evictions may change), else the checks in turn: either
			// answer, each exact, passes.
			want := check(predict(m.Atomic))
			if want != "" && !m.Atomic {
				if other := check(predict(true)); other == "" {
					want = ""
				} else {
					want += ", or " + other
				}
			}
			if want != "" {
				t.Fatalf("step %d: AllowAll(%v) = %+v, %v; want %s", step, ks, d, err, want)
			}
			if err == nil && d.Allowed {
				for j, k := range ks {
					mod.tok[idx[j]] -= int64(k.Cost) * int64(multiLimits[idx[j]].Per)
				}
			}
		case 3:
			if op&4 != 0 { // a sweep: eviction never changes a decision
				if b, ok := pl.(keyrate.BoundedLimiter); ok {
					b.Sweep()
				}
				continue
			}
			i, c := next()%3, next()%2+1
			mod.refill(clk.Now())
			d, err := pl.AllowTier(keys[i], tiers[i], c)
			if want := mod.whole(i) >= c; err != nil || d.Allowed != want {
				t.Fatalf("step %d: AllowTier(%s, %d) = %+v, %v; want allowed %v", step, keys[i], c, d, err, want)
			}
			if d.Allowed {
				mod.tok[i] -= int64(c) * int64(multiLimits[i].Per)
			}
		}
		mod.refill(clk.Now())
		for i := range keys {
			if p, err := pl.PeekTier(keys[i], tiers[i]); err != nil || p.Remaining != mod.whole(i) {
				t.Fatalf("step %d: PeekTier(%s) = %+v, %v; the model holds %d", step, keys[i], p, err, mod.whole(i))
			}
		}
	}
}
