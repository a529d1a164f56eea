package rules_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
)

var windowAlgorithms = []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow}

// windowRule compiles l with a manual clock at its epoch, returning the
// rule (time in ticks of 1ns).
func windowRule(t testing.TB, l keyrate.Limit) *rules.Rule {
	t.Helper()
	r, err := rules.NewRule(l, clock.NewManual(time.Hour))
	if err != nil {
		t.Fatalf("NewRule(%v): %v", l, err)
	}
	return &r
}

// windowRun drives a rule and the plain model through the same requests
// and fails at the first decision they disagree on.
type windowRun struct {
	t     testing.TB
	r     *rules.Rule
	m     *conformance.WindowModel
	s     rules.State
	step  int
	trail []string
}

func newWindowRun(t testing.TB, l keyrate.Limit) *windowRun {
	return &windowRun{t: t, r: windowRule(t, l), m: conformance.NewWindowModel(l)}
}

func (w *windowRun) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%v, after\n%v\nstep %d: %s", w.r.Limit(), w.trail, w.step, fmt.Sprintf(format, args...))
}

// take spends cost at tick now (wait 0) or reserves it (wait > 0), and
// compares the decision, the slot and the states' remaining tokens.
func (w *windowRun) take(now uint64, cost int, wait uint64) {
	w.t.Helper()
	w.step++
	w.trail = append(w.trail, fmt.Sprintf("%d: take(t=%d, c=%d, wait=%d)", w.step, now, cost, wait))
	next, ok := w.r.Reserve(w.s, now, cost, wait)
	var mok bool
	var slot int64
	if wait == 0 {
		mok = w.m.Take(int64(now), int64(cost))
		slot = int64(now)
	} else {
		slot, mok = w.m.Reserve(int64(now), int64(cost), int64(wait))
	}
	if ok != mok {
		w.fail("Reserve(t=%d, c=%d, wait=%d) = %v, model %v", now, cost, wait, ok, mok)
	}
	if !ok && next != w.s {
		w.fail("a denied request moved the state %#x to %#x", w.s, next)
	}
	if ok && next < w.s {
		w.fail("the state moved backwards, %#x to %#x", w.s, next)
	}
	if ok {
		if got := w.r.Slot(next, now); int64(got) != slot {
			w.fail("Slot = %d, model %d", got, slot)
		}
		if got := w.r.Waits(next, now); got != (uint64(slot) > now) {
			w.fail("Waits = %v with the slot at %d", got, slot)
		}
	} else if got := w.r.SlotFor(w.s, now, cost); int64(got) != w.m.Earliest(int64(now), int64(cost)) {
		w.fail("SlotFor = %d, model %d", got, w.m.Earliest(int64(now), int64(cost)))
	}
	w.s = next
	if wait == 0 {
		w.decide(now, cost, ok)
	}
	w.peek(now)
}

// decide compares Decide for a request of cost at now with the model's.
func (w *windowRun) decide(now uint64, cost int, allowed bool) {
	w.t.Helper()
	got := w.r.Decide(w.s, now, cost, allowed)
	want := w.m.Decide(int64(now), int64(cost), allowed)
	want.Policy, want.Window, want.Limit = got.Policy, got.Window, w.r.Limit()
	if got != want {
		w.fail("Decide(t=%d, c=%d) = %+v, model %+v", now, cost, got, want)
	}
}

// peek compares Peek, Full and Tokens at now with the model's.
func (w *windowRun) peek(now uint64) {
	w.t.Helper()
	got := w.r.Peek(w.s, now)
	want := w.m.Decide(int64(now), 1, w.m.Allows(int64(now), 1))
	want.Policy, want.Window, want.Limit = got.Policy, got.Window, w.r.Limit()
	if got != want {
		w.fail("Peek(t=%d) = %+v, model %+v", now, got, want)
	}
	if full, want := w.r.Full(w.s, now), int64(now) >= w.m.FullAt(); full != want {
		w.fail("Full(t=%d) = %v, model full from %d", now, full, w.m.FullAt())
	}
	// Reading is the model's, or later but not after now: a state that
	// counts nothing still refuses readings before its window (the model
	// knows no stale readings).
	if got, want := w.r.Reading(w.s)-time.Hour, time.Duration(w.m.FullAt()); got != want && (got < want || got > time.Duration(now)) {
		w.fail("Reading = epoch+%v, model full from %v", got, want)
	}
}

func (w *windowRun) refund(now uint64, cost int) {
	w.t.Helper()
	w.step++
	w.trail = append(w.trail, fmt.Sprintf("%d: refund(t=%d, c=%d)", w.step, now, cost))
	w.s = w.r.Refund(w.s, now, cost)
	w.m.Refund(int64(now), int64(cost))
	w.peek(now)
}

// randomWindowLimit returns a valid window limit with a short window, so
// that the model's searches stay small, or a long one.
func randomWindowLimit(rng *rand.Rand, alg keyrate.Algorithm) keyrate.Limit {
	for {
		per := time.Duration(1 + rng.IntN(40))
		if rng.IntN(4) == 0 {
			per = time.Duration(1 + rng.IntN(1e6))
		}
		n := 1 + rng.IntN(12)
		if rng.IntN(4) == 0 {
			n = 1 + rng.IntN(200)
		}
		l := keyrate.Limit{Rate: n, Per: per}.Using(alg)
		if l.Validate() == nil {
			return l
		}
	}
}

// windowStep returns the next tick after now: the same tick, the next,
// a window boundary's neighbours, or a jump.
func windowStep(rng *rand.Rand, now uint64, per uint64) uint64 {
	switch rng.IntN(6) {
	case 0:
		return now
	case 1:
		return now + 1
	case 2: // the last tick of this window
		return (now/per+1)*per - 1
	case 3: // the first of the next
		return (now/per + 1) * per
	case 4:
		return now + uint64(rng.Int64N(int64(per)))
	}
	return now + uint64(rng.Int64N(int64(3*per)))
}

// TestWindowRulesAgainstModel checks every decision of the window rules,
// spends, reservations and refunds, against the plain model: Allowed,
// Remaining, RetryAfter (the earliest tick the same request is allowed),
// ResetAfter, the slot, Full and Reading.
func TestWindowRulesAgainstModel(t *testing.T) {
	for _, alg := range windowAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(alg)))
			for range 300 {
				l := randomWindowLimit(rng, alg)
				w := newWindowRun(t, l)
				per := uint64(l.Per)
				now := uint64(rng.Int64N(int64(3 * per)))
				for range 60 {
					now = windowStep(rng, now, per)
					cost := 1 + rng.IntN(l.Rate)
					if rng.IntN(3) == 0 {
						cost = 1
					}
					switch rng.IntN(8) {
					case 0:
						w.refund(now, cost)
					case 1:
						w.take(now, cost, uint64(rng.Int64N(int64(3*per))))
					default:
						w.take(now, cost, 0)
					}
				}
			}
		})
	}
}

// FuzzWindowRules is TestWindowRulesAgainstModel driven by the fuzzer.
func FuzzWindowRules(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint16(10), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(1), uint8(7), uint16(7), []byte{9, 3, 3, 3, 200, 1, 1, 1, 17, 40})
	f.Fuzz(func(t *testing.T, alg, n uint8, per uint16, ops []byte) {
		l := keyrate.Limit{Rate: 1 + int(n%50), Per: time.Duration(1 + per%2000)}.Using(windowAlgorithms[alg%2])
		if l.Validate() != nil {
			return
		}
		w := newWindowRun(t, l)
		now, p := uint64(0), uint64(l.Per)
		for i := 0; i+1 < len(ops) && i < 200; i += 2 {
			op, arg := ops[i], uint64(ops[i+1])
			switch op % 4 {
			case 0:
				now += arg * p / 16
			case 1:
				now = (now/p+1)*p - arg%2 // the last tick of this window, or the next's first
			}
			cost := 1 + int(arg)%l.Rate
			switch op / 4 % 4 {
			case 0:
				w.refund(now, cost)
			case 1:
				w.take(now, cost, arg*p/32)
			default:
				w.take(now, cost, 0)
			}
		}
	})
}

// TestWindowBoundaries checks requests at the last and the first tick of
// adjacent windows, and at W − 1, W and W + 1 after a burst, against
// hand-worked decisions.
func TestWindowBoundaries(t *testing.T) {
	const W = 1000
	type step struct {
		at   uint64
		cost int
		ok   bool
		rem  int
	}
	for _, c := range []struct {
		alg   keyrate.Algorithm
		steps []step
	}{
		{keyrate.FixedWindow, []step{
			{999, 10, true, 0}, // a burst at the last tick of window 0
			{999, 1, false, 0},
			{1000, 10, true, 0}, // the first tick of window 1: 20 in 2 ticks
			{1999, 1, false, 0}, // W − 1 after it
			{2000, 1, true, 9},  // W after it
			{2001, 9, true, 0},  // W + 1
		}},
		{keyrate.FixedWindow, []step{
			{0, 10, true, 0}, // a burst at t = 0
			{999, 1, false, 0},
			{1000, 1, true, 9},
			{1001, 9, true, 0},
		}},
		{keyrate.SlidingWindow, []step{
			{999, 10, true, 0},  // a burst at the last tick of window 0
			{1000, 1, false, 0}, // 10·1000 + 1·1000 > 10·1000
			{1099, 1, false, 0}, // 10·901 + 1000 = 10010 > 10000
			{1100, 1, true, 0},  // 10·900 + 1000 = 10000
			{1999, 1, true, 7},  // W − 1 after the burst: 10·1 + 2·1000 ≤ 10000; 10 − 2 − ⌈10/1000⌉ left
			{2000, 8, true, 0},  // window 2, e = 0: p = 2: 2·1000 + 8·1000
			{2999, 2, false, 1}, // 2·1 + 10·1000 > 10000; 10 − 8 − ⌈2/1000⌉ left
			{3000, 2, true, 0},  // window 3: p = 8: 8·1000 + 2·1000
		}},
		{keyrate.SlidingWindow, []step{
			{0, 10, true, 0},
			{999, 1, false, 0}, // W − 1 after the burst
			{1000, 1, false, 0},
			{1100, 1, true, 0},
			{1999, 1, true, 7}, // 10·1 + 2000 ≤ 10000: 10 − 2 − ⌈10/1000⌉ = 7 left
			{2000, 10, false, 8},
			{2001, 8, true, 0},
		}},
	} {
		r := windowRule(t, keyrate.Limit{Rate: 10, Per: W}.Using(c.alg))
		var s rules.State
		for i, st := range c.steps {
			next, ok := r.Take(s, st.at, st.cost)
			d := r.Decide(next, st.at, st.cost, ok)
			if ok != st.ok || d.Remaining != st.rem {
				t.Fatalf("%v step %d: Take(t=%d, c=%d) = %v, Remaining %d; want %v, %d", c.alg, i, st.at, st.cost, ok, d.Remaining, st.ok, st.rem)
			}
			s = next
		}
	}
}

// TestWindowStaleReading checks that a reading from an earlier window than
// the state's spends nothing, and that a reading earlier in the same
// window never gets more than a later one.
func TestWindowStaleReading(t *testing.T) {
	for _, alg := range windowAlgorithms {
		r := windowRule(t, keyrate.Limit{Rate: 10, Per: 1000}.Using(alg))
		s, _ := r.Take(0, 1500, 1) // window 1
		if _, ok := r.Take(s, 999, 1); ok {
			t.Errorf("%v: a reading from window 0 spent from window 1's state", alg)
		}
		if got := r.Tokens(s, 999); got != 0 {
			t.Errorf("%v: Tokens at a stale reading = %d, want 0", alg, got)
		}
		rng := rand.New(rand.NewPCG(7, uint64(alg)))
		for range 10000 {
			var s rules.State
			base := uint64(rng.IntN(5000))
			for range rng.IntN(8) {
				if n, ok := r.Take(s, base+uint64(rng.IntN(300)), 1+rng.IntN(3)); ok {
					s = n
				}
			}
			t1 := base + uint64(rng.IntN(3000))
			t2 := t1 + uint64(rng.IntN(3000))
			if r.Tokens(s, t1) > r.Tokens(s, t2) {
				t.Fatalf("%v: state %#x holds %d at %d but %d later at %d", alg, s, r.Tokens(s, t1), t1, r.Tokens(s, t2), t2)
			}
		}
	}
}

// TestWindowFullIsNew checks that a state Full at t decides every later
// request as a new key (FullState(t)) does: eviction changes nothing.
func TestWindowFullIsNew(t *testing.T) {
	for _, alg := range windowAlgorithms {
		rng := rand.New(rand.NewPCG(11, uint64(alg)))
		for range 2000 {
			l := randomWindowLimit(rng, alg)
			r, per := windowRule(t, l), uint64(l.Per)
			var s rules.State
			now := uint64(0)
			for range rng.IntN(10) {
				now = windowStep(rng, now, per)
				if n, ok := r.Reserve(s, now, 1+rng.IntN(l.Rate), uint64(rng.IntN(2))*per); ok {
					s = n
				}
			}
			at := now + uint64(rng.Int64N(int64(3*per)))
			if !r.Full(s, at) {
				continue
			}
			if r.Reading(s) > time.Hour+time.Duration(at) {
				t.Fatalf("%v: Full at %d but Reading is later, %v", l, at, r.Reading(s)-time.Hour)
			}
			fresh := r.FullState(at)
			for range 5 {
				t2, cost := at+uint64(rng.Int64N(int64(2*per))), 1+rng.IntN(l.Rate)
				a, oka := r.Take(s, t2, cost)
				b, okb := r.Take(fresh, t2, cost)
				if oka != okb || r.Decide(a, t2, cost, oka) != r.Decide(b, t2, cost, okb) {
					t.Fatalf("%v: state %#x, full at %d, decides differently from a new key at %d", l, s, at, t2)
				}
				s, fresh = a, b
			}
		}
	}
}

// TestWindowCancel checks that cancelling the latest reservation gives
// its cost back, and that a cancel of a state it did not leave fails.
func TestWindowCancel(t *testing.T) {
	for _, alg := range windowAlgorithms {
		rs, err := rules.NewRules(keyrate.Policy{Name: "w", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: time.Second}.Using(alg)}}, clock.NewManual(0))
		if err != nil {
			t.Fatal(err)
		}
		s := []rules.State{0}
		if rs.Take(s, 100*time.Millisecond, 4) >= 0 {
			t.Fatalf("%v: the first burst was denied", alg)
		}
		before := s[0]
		at := 200 * time.Millisecond
		slot, denied := rs.Reserve(s, at, 2, time.Hour)
		if denied >= 0 || slot <= at {
			t.Fatalf("%v: Reserve = %v, %d: want a slot ahead", alg, slot, denied)
		}
		end := rs.End(s)
		if !rs.Cancel(s, end, at, slot, 2) {
			t.Fatalf("%v: Cancel of the latest reservation failed", alg)
		}
		if got := rs.Rule(0).Tokens(s[0], uint64(slot)); got < rs.Rule(0).Tokens(before, uint64(slot)) {
			t.Errorf("%v: after Cancel the key holds %d at the slot, want what it held before (%d)", alg, got, rs.Rule(0).Tokens(before, uint64(slot)))
		}
		if rs.Cancel(s, end, at, slot, 2) {
			t.Errorf("%v: a second Cancel succeeded", alg)
		}
	}
}

// TestWindowLimitErrors checks the window limits refused, and that each
// error names the value and its bound.
func TestWindowLimitErrors(t *testing.T) {
	for _, c := range []struct {
		l    keyrate.Limit
		want string
	}{
		{keyrate.Limit{Rate: 10, Per: time.Second, Burst: 5, Algorithm: keyrate.FixedWindow}, "Burst 5 differs from Rate 10"},
		{keyrate.Limit{Rate: 0, Per: time.Second, Algorithm: keyrate.SlidingWindow}, "Rate 0 is below 1"},
		{keyrate.Limit{Rate: 1, Per: 0, Burst: 1, Algorithm: keyrate.FixedWindow}, "Per 0s is below 1ns"},
		{keyrate.Limit{Rate: 1, Per: 200 * 365 * 24 * time.Hour}.Using(keyrate.FixedWindow), "above the longest fixed-window window"},
		{keyrate.PerSecond(1 << 20).Using(keyrate.SlidingWindow), "Rate 1048576 is too many for a sliding-window window of 1s: the state counts at most 131071"},
		{keyrate.Limit{Rate: 100, Per: time.Nanosecond}.Using(keyrate.FixedWindow), "counts at most 3"},
		// A fixed window keeps the previous window's count too (for Debt), so
		// it has the sliding window's bounds.
		{keyrate.PerSecond(1 << 20).Using(keyrate.FixedWindow), "Rate 1048576 is too many for a fixed-window window of 1s: the state counts at most 131071"},
		{keyrate.Limit{Rate: 1, Per: time.Second, Burst: 1, Algorithm: 9}, "Algorithm(9) is not one of"},
	} {
		err := c.l.Validate()
		if !errors.Is(err, keyrate.ErrInvalidLimit) || !contains(err.Error(), c.want) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidLimit naming %q", c.l, err, c.want)
		}
	}
	for _, l := range []keyrate.Limit{
		keyrate.PerSecond(131071).Using(keyrate.SlidingWindow),
		keyrate.PerSecond(131071).Using(keyrate.FixedWindow),
		keyrate.PerMinute(1<<20 - 1).Using(keyrate.SlidingWindow),
		keyrate.Limit{Rate: 3, Per: time.Nanosecond}.Using(keyrate.FixedWindow),
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%v.Validate() = %v, want nil", l, err)
		}
	}
	if _, err := keyrate.ParseAlgorithm("leaky"); !errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Errorf("ParseAlgorithm(leaky) = %v, want ErrInvalidLimit", err)
	}
	for _, a := range append(windowAlgorithms, keyrate.TokenBucket) {
		if got, err := keyrate.ParseAlgorithm(a.String()); got != a || err != nil {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestWindowSlotForCostOverN checks that SlotFor and Reserve return for a
// cost no window can hold (a precondition callers check), with a slot
// past any reading.
func TestWindowSlotForCostOverN(t *testing.T) {
	for _, alg := range windowAlgorithms {
		r := windowRule(t, keyrate.PerSecond(3).Using(alg))
		if slot := r.SlotFor(0, 0, 4); slot < uint64(r.Range()) {
			t.Errorf("%v: SlotFor(cost 4 > N 3) = %d, want past the clock range %d", alg, slot, uint64(r.Range()))
		}
		if _, ok := r.Reserve(0, 0, 4, 1<<62); ok {
			t.Errorf("%v: Reserve of cost 4 > N 3 allowed", alg)
		}
	}
}
