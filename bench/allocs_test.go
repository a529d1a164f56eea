package bench

import (
	"testing"
)

// TestKnownKeyAllocs checks that Allow and AllowN on known keys allocate
// nothing, for every subject and policy row: the benchmarks report
// allocs/op, and this makes a regression fail the tests, not only a
// report's target. The keys end in every decimal digit, so that 3tiers
// uses all three tiers.
func TestKnownKeyAllocs(t *testing.T) {
	cases := append([]subjectCase(nil), subjects...)
	for _, row := range policyRows {
		cases = append(cases, row.subjectCase)
	}
	keys := makeKeys("key-", 30)
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
		})
	}
}
