package conformance_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// FuzzStoresAgreeAllow drives Allow, AllowN, Refund, Sweep and a clock
// that moves forwards on keys of one token bucket, two token buckets and
// a fixed window, and checks that every in-process store decides every
// call alike. The other differential targets call AllowN alone; Allow is
// where the stores decide a deny without a lock or a write by other code
// (striped's seek mode, mutexbucket's read of the state, atomicbucket's
// deny from window 0's word on a key of several windows), so a deny that
// path gives where the locked path would allow shows here as a store
// that parts from the others. Keys of 1, 8 to 16 and over 16 bytes take
// each lookup (flatmap.Map.Seek and SeekLong).
func FuzzStoresAgreeAllow(f *testing.F) {
	f.Add([]byte{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 2, 3, 0, 0, 0, 4, 5, 0, 0, 1, 1, 7})
	f.Add([]byte{1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 2, 40, 0, 1, 0, 1, 4, 0, 0, 2, 0, 2, 0, 2, 2, 200, 0, 2, 5, 0, 0, 3, 0, 3})
	f.Add([]byte{2, 2, 0, 4, 0, 4, 1, 4, 2, 10, 0, 4, 3, 4, 0, 4, 5, 0, 2, 255, 0, 4, 0, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		if len(data) > 2+2*200 {
			data = data[:2+2*200]
		}
		one := keyrate.Limit{Rate: 1 + int(data[0]%4), Per: time.Duration(1+data[1]%3) * 100 * time.Millisecond, Burst: 1 + int(data[0]/4%4)}
		named := []keyrate.Policy{
			{Name: "two", Limits: []keyrate.Limit{{Rate: 2, Per: 100 * time.Millisecond, Burst: 3}, {Rate: 3, Per: time.Second, Burst: 5}}},
			{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: 300 * time.Millisecond}.Using(keyrate.FixedWindow)}},
		}
		keys := []string{"a", "one-key-0001", "a key of one bucket, long", "two-key-0002", "t", "fixed-key-03"}
		policyOf := func(key string) string {
			switch {
			case strings.HasPrefix(key, "two"), key == "t":
				return "two"
			case strings.HasPrefix(key, "fixed"):
				return "fixed"
			}
			return ""
		}
		clk := clock.NewManual(time.Hour)
		var ls []boundStore
		for _, s := range stores {
			l, err := s.new(one, keyrate.WithClock(clk), keyrate.WithPolicies(named...), keyrate.WithPolicyFunc(policyOf))
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l.(boundStore))
		}
		for i, ops := 0, data[2:]; len(ops) >= 2; i, ops = i+1, ops[2:] {
			op, arg := ops[0], ops[1]
			k := keys[int(arg)%len(keys)]
			switch op % 6 {
			case 0, 1: // Allow
				first := ls[0].Allow(k)
				for j, l := range ls[1:] {
					if got := l.Allow(k); got != first {
						t.Fatalf("op %d Allow(%q) at %v: %s = %v, %s = %v", i, k, clk.Now(), stores[j+1].name, got, stores[0].name, first)
					}
				}
			case 2: // AllowN
				cost := 1 + int(op/6)%2
				first, firstErr := ls[0].AllowN(k, cost)
				for j, l := range ls[1:] {
					if got, err := l.AllowN(k, cost); got != first || (err == nil) != (firstErr == nil) {
						t.Fatalf("op %d AllowN(%q, %d) at %v: %s = %+v, %v; %s = %+v, %v", i, k, cost, clk.Now(), stores[j+1].name, got, err, stores[0].name, first, firstErr)
					}
				}
			case 3: // the clock moves on: a fraction of a token, or more
				clk.Advance(time.Duration(arg) * time.Millisecond)
			case 4: // Refund
				for _, l := range ls {
					l.Refund(k, 1)
				}
			case 5: // Sweep: eviction never changes a decision
				for _, l := range ls {
					l.Sweep()
				}
			}
		}
	})
}
