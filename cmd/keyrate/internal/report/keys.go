package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// million is the key count of the full set's large workloads (uniform-1M,
// uniform-1M-idle, zipf-1M) and BenchmarkMemory, at which the targets on
// memory and on large key sets are stated.
const million = 1_000_000

// memoryKeys returns the number of keys BenchmarkMemory inserted into each
// store (its keys metric), or a million for results written before the
// benchmark reported it, when it always inserted a million.
func (s *Set) memoryKeys() int {
	n := 0
	for c, v := range s.values {
		if c.Bench == benchMemory && c.Unit == unitKeys {
			for _, x := range v {
				n = max(n, int(x))
			}
		}
	}
	if n == 0 {
		return million
	}
	return n
}

// largeKeys returns the distinct keys of the set's large workloads, as
// their names say (uniform-<n>, uniform-<n>-idle, zipf-<n>; the largest
// n but for uniform-1k, a small workload in every set), or 0 if it has
// none.
func (s *Set) largeKeys() int {
	large := 0
	for _, wl := range s.Workloads {
		if wl == "uniform-1k" {
			continue
		}
		name := strings.TrimSuffix(wl, "-idle")
		for _, prefix := range []string{"uniform-", "zipf-"} {
			if v, ok := strings.CutPrefix(name, prefix); ok {
				if n, ok := parseCount(v); ok {
					large = max(large, n)
				}
			}
		}
	}
	return large
}

// countName writes a key count as the workload names do: 1M, 100k, or the
// number where it is no whole number of thousands.
func countName(n int) string {
	switch {
	case n >= million && n%million == 0:
		return strconv.Itoa(n/million) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// countWords is a key count in a sentence: "a million", or countName's.
func countWords(n int) string {
	if n == million {
		return "a million"
	}
	return countName(n)
}

// parseCount reads a count as countName writes it.
func parseCount(v string) (int, bool) {
	digits, mult := v, 1
	switch {
	case strings.HasSuffix(v, "M"):
		digits, mult = strings.TrimSuffix(v, "M"), million
	case strings.HasSuffix(v, "k"):
		digits, mult = strings.TrimSuffix(v, "k"), 1000
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > million*million {
		return 0, false
	}
	return n * mult, true
}

// quickNote writes, for a set measured with fewer than a million keys in
// its large workloads or BenchmarkMemory (make report's quick set), what
// it cannot show; nothing for a full set.
func (m *md) quickNote() {
	s := m.s
	large, mem := s.largeKeys(), s.memoryKeys()
	if (large == 0 || large >= million) && mem >= million {
		return
	}
	var sizes []string
	if large > 0 && large < million {
		sizes = append(sizes, fmt.Sprintf("the large workloads have %s keys, not a million", countName(large)))
	}
	if mem < million {
		sizes = append(sizes, fmt.Sprintf("BenchmarkMemory inserted %s keys a store", countName(mem)))
	}
	m.p("**A quick set** (`make report`): %s. It cannot show:\n", strings.Join(sizes, ", and "))
	m.p("- memory per key and the forced GC's time with a million keys;")
	m.p("- the cache and TLB misses of a table of a million keys, which smaller tables meet far less often: the large workloads' times are lower than a million keys would give, and the stores need not rank as they would there;")
	m.p("- the targets stated at a million keys, marked not measured below;")
	if len(s.Procs) > 0 && !slices.ContainsFunc(s.Procs, s.Oversubscribed) {
		m.p("- core counts above %d, where goroutines outnumber the CPUs;", s.Procs[len(s.Procs)-1])
	}
	m.p("- differences smaller than its intervals, which %s on a shared machine leave wide.\n", m.runs())
	m.p("`make report FULL=1` runs the full matrix.\n")
}
