package rules_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// spendBuckets is what Buckets documents a store may do instead of Spend:
// window i's TakeAt at Elapsed(t) for i from 0 up, all or nothing.
func spendBuckets(rs *rules.Rules, s []rules.State, t time.Duration, cost int) int {
	e := rs.Elapsed(t)
	next := make([]rules.State, len(s))
	for i := range s {
		n, ok := rs.Rule(i).TakeAt(s[i], e, cost)
		if !ok {
			return i
		}
		next[i] = n
	}
	copy(s, next)
	return -1
}

// FuzzBucketsSpend checks that Buckets, Elapsed and Rule.TakeAt give
// exactly Spend's result and states (the store's hot path decides with
// them, the other stores with Spend), over policies of two to MaxLimits
// token-bucket windows of every scale (so windows of different clock
// ranges), epochs on either side of zero, readings before the epoch, at
// it, at and past the end of the clock range and at the extremes of
// time.Duration, and states from full to a reservation's furthest. A
// TakeAt that clamped a reading to its own range alone, not window 0's as
// Spend does, or an Elapsed that mishandled a reading before the epoch or
// one whose difference from it overflows, fails here.
func FuzzBucketsSpend(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0xb0c7))
		// Intervals of a microsecond or more (valid), most of them not
		// a whole number of nanoseconds (a scale above 1).
		pers := []time.Duration{time.Millisecond, time.Second, 10 * time.Second, time.Hour, 24 * time.Hour}
		limits := make([]keyrate.Limit, 2+rng.IntN(keyrate.MaxLimits-1))
		for i := range limits {
			per := pers[rng.IntN(len(pers))]
			rate := 1 + rng.IntN(min(int(per/time.Microsecond), []int{3, 1000, 1 << 20}[rng.IntN(3)]))
			limits[i] = keyrate.Limit{Rate: rate, Per: per, Burst: 1 + rng.IntN(min(1000*rate, []int{1, 10, 1 << 20}[rng.IntN(3)]))} // filling in under 3 years
		}
		epochs := []time.Duration{0, time.Hour, -time.Hour, math.MinInt64 / 2, math.MaxInt64 / 2}
		epoch := epochs[rng.IntN(len(epochs))]
		rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: limits}, clock.NewManual(epoch))
		if err != nil {
			t.Fatal(err)
		}
		if !rs.Buckets() {
			t.Fatalf("%v: Buckets() = false", limits)
		}
		minBurst := slices.MinFunc(limits, func(a, b keyrate.Limit) int { return a.Burst - b.Burst }).Burst
		r0 := rs.Rule(0)
		for range 200 {
			var at time.Duration
			switch rng.IntN(8) {
			case 0:
				at = epoch - time.Duration(rng.IntN(3))
			case 1:
				at = epoch + r0.Range() + time.Duration(rng.IntN(3)) - 1
			case 2:
				at = []time.Duration{math.MinInt64, math.MaxInt64}[rng.IntN(2)]
			case 3:
				at = epoch + time.Duration(rng.Int64N(int64(r0.Range())))
			default:
				at = epoch + time.Duration(rng.IntN(int(time.Hour)))
			}
			cost := 1 + rng.IntN(minBurst)
			s := make([]rules.State, rs.Len())
			for i := range s {
				r := rs.Rule(i)
				now := r.Ticks(at)
				switch rng.IntN(4) {
				case 0: // full
				case 1:
					s[i] = rules.State(now + rng.Uint64N(r.Scale()*uint64(r.Limit().Per)+1))
				case 2: // a reservation's furthest, past the fill time
					s[i] = rules.State(now + r.WaitTicks(math.MaxInt64) + rng.Uint64N(2))
				default:
					s[i] = rules.State(rng.Uint64N(1 << 62))
				}
			}
			want := slices.Clone(s)
			wantDenied := rs.Spend(want, at, cost)
			got := slices.Clone(s)
			if denied := spendBuckets(rs, got, at, cost); denied != wantDenied || !slices.Equal(got, want) {
				t.Fatalf("%v, epoch %v: from %v at %v cost %d: TakeAt gives %d %v; Spend %d %v",
					limits, epoch, s, at, cost, denied, got, wantDenied, want)
			}
		}
	})
}

// TestBuckets: Buckets is true for a policy of several token buckets
// alone.
func TestBuckets(t *testing.T) {
	tb := keyrate.Limit{Rate: 1, Per: time.Second, Burst: 1}
	fw := keyrate.Limit{Rate: 1, Per: time.Second}.Using(keyrate.FixedWindow)
	for _, c := range []struct {
		limits []keyrate.Limit
		want   bool
	}{
		{[]keyrate.Limit{tb}, false},
		{[]keyrate.Limit{tb, tb}, true},
		{[]keyrate.Limit{tb, tb, tb}, true},
		{[]keyrate.Limit{tb, fw}, false},
		{[]keyrate.Limit{fw, tb}, false},
	} {
		rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: c.limits}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := rs.Buckets(); got != c.want {
			t.Errorf("Buckets() of %v = %v, want %v", c.limits, got, c.want)
		}
	}
}
