package bench

import (
	"context"
	"testing"

	"github.com/keyrate/keyrate"
)

// TestKnownKeyAllocs checks that Allow and AllowN on known keys allocate
// nothing, for every subject, policy row and wait row, and so do Wait
// and Reserve, needing no wait, for every one that is a
// keyrate.WaitLimiter (every store): the benchmarks report allocs/op, and
// this makes a regression fail the tests, not only a report's target. The
// keys end in every decimal digit, so that 3tiers uses all three tiers.
func TestKnownKeyAllocs(t *testing.T) {
	cases := append([]subjectCase(nil), subjects...)
	for _, row := range policyRows {
		cases = append(cases, row.subjectCase)
	}
	for _, row := range waitRows {
		cases = append(cases, row.subjectCase)
	}
	keys := makeKeys("key-", 30)
	ctx := context.Background()
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) {
			s, release, err := sc.new(open)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			for _, k := range keys {
				prefill(s, open, k)
			}
			if sc.check != nil {
				if err := sc.check(s, keys); err != nil {
					t.Fatal(err)
				}
			}
			if n := testing.AllocsPerRun(100, func() {
				for _, k := range keys {
					s.Allow(k)
					if _, err := s.AllowN(k, 2); err != nil {
						t.Fatal(err)
					}
				}
			}); n != 0 {
				t.Errorf("Allow and AllowN on %d known keys: %v allocations per run, want 0", len(keys), n)
			}
			w, ok := s.(keyrate.WaitLimiter)
			if !ok {
				return
			}
			if n := testing.AllocsPerRun(100, func() {
				for _, k := range keys {
					if err := w.Wait(ctx, k, 1); err != nil {
						t.Fatal(err)
					}
					if r, err := w.Reserve(k, 2, reserveMaxWait); err != nil || !r.OK() || r.Delay() != 0 {
						t.Fatalf("Reserve(%q, 2, %v) = OK %v, Delay %v, %v; want OK with no wait", k, reserveMaxWait, r.OK(), r.Delay(), err)
					}
				}
			}); n != 0 {
				t.Errorf("Wait and Reserve on %d known keys, needing no wait: %v allocations per run, want 0", len(keys), n)
			}
		})
	}
}
