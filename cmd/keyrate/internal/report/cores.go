package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// minScalingProcs is the fewest core counts within the machine's CPUs that
// make a set show scaling: 1 → N needs more than one step. A 2-core
// machine's set (-cpu 1 and 2 fit, the rest oversubscribe) has two, and its
// report has no section on core counts.
const minScalingProcs = 3

// manyCores reports whether s was measured at enough core counts within
// the machine's CPUs to show how the stores scale (see minScalingProcs):
// then the report adds "Across core counts" and its charts put the core
// counts on a log₂ axis, with the floor drawn as the ideal line.
func (s *Set) manyCores() bool { return len(s.fitProcs()) >= minScalingProcs }

// allowSubjects returns the subjects measured by BenchmarkAllow on wl at
// some core count, in report order.
func (s *Set) allowSubjects(wl string) []string {
	var out []string
	for _, subj := range s.Subjects {
		for _, p := range s.Procs {
			if _, ok := s.Median(allow(subj, wl, p, unitNs)); ok {
				out = append(out, subj)
				break
			}
		}
	}
	return out
}

// allowMeasured reports whether subj has a BenchmarkAllow result on some
// workload: a store variant may be measured by BenchmarkMemory only.
func (s *Set) allowMeasured(subj string) bool {
	return slices.ContainsFunc(s.Workloads, func(wl string) bool { return slices.Contains(s.allowSubjects(wl), subj) })
}

// byTime returns the plain stores measured on wl at procs, fastest (lowest
// median ns/op) first, with their medians.
func (s *Set) byTime(wl string, procs int) ([]string, []float64) {
	var stores []string
	for _, st := range s.plainStores() {
		if _, ok := s.Median(allow(st, wl, procs, unitNs)); ok {
			stores = append(stores, st)
		}
	}
	slices.SortStableFunc(stores, func(a, b string) int {
		x, _ := s.Median(allow(a, wl, procs, unitNs))
		y, _ := s.Median(allow(b, wl, procs, unitNs))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	ns := make([]float64, len(stores))
	for i, st := range stores {
		ns[i], _ = s.Median(allow(st, wl, procs, unitNs))
	}
	return stores, ns
}

// procsRange names a run of consecutive measured core counts: "-cpu 4" or
// "-cpu 2 to 16".
func procsRange(ps []int) string {
	if len(ps) == 1 {
		return fmt.Sprintf("-cpu %d", ps[0])
	}
	return fmt.Sprintf("-cpu %d to %d", ps[0], ps[len(ps)-1])
}

// span is a run of consecutive core counts sharing one statement.
type span struct {
	text  string
	procs []int
}

// spans groups procs, in order, into runs of equal text(p); a p whose text
// is "" ends a run and is left out.
func spans(procs []int, text func(p int) string) []span {
	var out []span
	prev := ""
	for _, p := range procs {
		t := text(p)
		switch {
		case t == "":
		case t == prev:
			out[len(out)-1].procs = append(out[len(out)-1].procs, p)
		default:
			out = append(out, span{t, []int{p}})
		}
		prev = t
	}
	return out
}

// pickAt words the fastest plain store on wl at procs, naming the
// runner-up where a Mann-Whitney U test cannot tell them apart; "" if no
// store was measured there.
func (s *Set) pickAt(wl string, procs int) string {
	best, next, cmp, ok := s.fastest(wl, procs)
	if !ok {
		return ""
	}
	if next != "" && cmp.P >= cmp.Alpha {
		return fmt.Sprintf("`%s` or `%s` (statistically tied)", best, next)
	}
	return "`" + best + "`"
}

// cores writes "Across core counts" for a set that shows scaling (see
// manyCores): which store to pick in each range of core counts, and each
// subject's throughput from 1 to N cores against the floor's.
func (m *md) cores() {
	s := m.s
	if !s.manyCores() {
		return
	}
	fit := s.fitProcs()
	top := fit[len(fit)-1]
	m.p("## Across core counts\n")
	m.p("Written by the generator from the medians at each core count up to the machine's %d CPUs (-cpu %s), with a Mann-Whitney U test between the two fastest stores; oversubscribed runs (more goroutines than CPUs) are left out of the picks. Throughput is calls per second over all goroutines, 10⁹ ÷ the median ns/op (ns/op is wall time per call across all goroutines).\n",
		s.Cores(), joinInts(fit))
	m.p("### Which store to pick, by core count\n")
	m.p("The fastest store on each workload, over the runs of core counts where it stays the fastest; then every store's median at -cpu %d, fastest first.\n", top)
	for _, wl := range s.Workloads {
		groups := spans(fit, func(p int) string { return s.pickAt(wl, p) })
		if len(groups) == 0 {
			continue
		}
		var parts []string
		for _, g := range groups {
			parts = append(parts, g.text+" at "+procsRange(g.procs))
		}
		line := fmt.Sprintf("- **%s**: %s", wl, strings.Join(parts, "; "))
		if stores, ns := s.byTime(wl, top); len(stores) > 1 {
			var at []string
			for i, st := range stores {
				at = append(at, fmt.Sprintf("`%s` %s", st, fmtNum(ns[i])))
			}
			line += fmt.Sprintf(". At -cpu %d: %s ns/op; the slowest takes %.1f× the fastest's time", top, strings.Join(at, ", "), ns[len(ns)-1]/ns[0])
		}
		m.p("%s.", line)
	}
	m.p("")
	m.p("By range of core counts, over the %d workloads (fastest and slowest by the medians; the list above says where the two fastest are statistically tied):\n", len(s.Workloads))
	for _, g := range spans(fit, s.rankAt) {
		m.p("- %s: %s.", procsRange(g.procs), g.text)
	}
	m.p("")
	m.scaling()
}

// rankAt words, at procs, which plain store is the fastest and which the
// slowest on each workload: "fastest: `atomic` on hotkey, uniform-1k;
// `mutex` on cost-mix. Slowest: `striped` on ..."; "" if no workload has
// two stores measured there.
func (s *Set) rankAt(procs int) string {
	fastest, slowest := map[string][]string{}, map[string][]string{}
	for _, wl := range s.Workloads {
		stores, _ := s.byTime(wl, procs)
		if len(stores) < 2 {
			continue
		}
		fastest[stores[0]] = append(fastest[stores[0]], wl)
		slowest[stores[len(stores)-1]] = append(slowest[stores[len(stores)-1]], wl)
	}
	if len(fastest) == 0 {
		return ""
	}
	list := func(by map[string][]string) string {
		var parts []string
		for _, st := range s.plainStores() {
			if wls := by[st]; len(wls) > 0 {
				parts = append(parts, fmt.Sprintf("`%s` on %s", st, strings.Join(wls, ", ")))
			}
		}
		return strings.Join(parts, "; ")
	}
	text := "fastest " + list(fastest) + "; slowest " + list(slowest)
	// The pick: the stores fastest on the most workloads (more than one)
	// and the slowest on none; and a store slowest on every workload.
	most, leaders := 0, []string(nil)
	for _, st := range s.plainStores() {
		switch n := len(fastest[st]); {
		case n > most:
			most, leaders = n, []string{st}
		case n == most && n > 0:
			leaders = append(leaders, st)
		}
	}
	leaders = slices.DeleteFunc(leaders, func(st string) bool { return len(slowest[st]) > 0 })
	n := 0
	for _, wls := range fastest {
		n += len(wls)
	}
	each := ""
	if len(leaders) > 1 {
		each = " each"
	}
	if len(leaders) > 0 && most > 1 {
		text += fmt.Sprintf(". Pick %s: fastest on %d of %d%s, slowest on none", orList(quote(leaders)), most, n, each)
	}
	for _, st := range s.plainStores() {
		if len(slowest[st]) == n && n > 1 {
			text += fmt.Sprintf("; `%s` is the slowest on all %d", st, n)
		}
	}
	return text
}

// scaling writes, for each workload, each subject's throughput at each
// core count as a multiple of its own at the fewest cores measured, and
// its time per call against the floor's at the same core count.
func (m *md) scaling() {
	s := m.s
	base := s.Procs[0]
	m.p("### Scaling: %d → N cores\n", base)
	m.p("Each cell: the subject's throughput at -cpu N ÷ its throughput at -cpu %d (its median ns/op at -cpu %d ÷ that at N: 2.00× does twice the calls per second), then in brackets its median ns/op ÷ the floor's at the same N, as in \"Each store against the baselines\". The -cpu %d column gives the throughput itself. The floor (no arithmetic, one CAS, see bench/doc.go) is the ideal line: a store whose ratio to the floor stays the same from column to column scales as the floor does, one whose ratio grows falls behind it.\n", base, base, base)
	for _, wl := range s.Workloads {
		subjects := s.allowSubjects(wl)
		if len(subjects) == 0 {
			continue
		}
		m.p("#### wl=%s\n", wl)
		var head []string
		for _, p := range s.Procs {
			head = append(head, m.procsLabel(p))
		}
		m.p("| subject | %s |", strings.Join(head, " | "))
		m.p("|---|%s", strings.Repeat("---:|", len(s.Procs)))
		for _, subj := range subjects {
			row := []string{"`" + subj + "`"}
			ns1, ok1 := s.Median(allow(subj, wl, base, unitNs))
			for _, p := range s.Procs {
				ns, ok := s.Median(allow(subj, wl, p, unitNs))
				switch {
				case !ok || ns <= 0:
					row = append(row, "—")
					continue
				case p == base:
					row = append(row, fmtRate(1e9/ns))
				case ok1 && ns1 > 0:
					row = append(row, fmt.Sprintf("%.2f×", ns1/ns))
				default:
					row = append(row, fmtRate(1e9/ns))
				}
				if subj != floor {
					if f, okF := s.ratio(allow(subj, wl, p, unitNs), allow(floor, wl, p, unitNs)); okF {
						row[len(row)-1] += fmt.Sprintf(" (%s floor)", fmtRatio(f, true))
					}
				}
			}
			m.p("| %s |", strings.Join(row, " | "))
		}
		m.p("")
	}
	m.oversubNote()
}

// fmtRate is calls per second, in millions: "10.7 M/s".
func fmtRate(perSec float64) string {
	return fmtNum(perSec/1e6) + " M/s"
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// joinInts is "1, 2, 4".
func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

// chartX is where the chart puts procs on its x axis: procs itself, or
// log₂ procs for a set that shows scaling (see manyCores), where 1 to 32
// on a linear axis would crowd the first four counts into its first
// tenth.
func (s *Set) chartX(procs int) float64 {
	if s.manyCores() {
		return math.Log2(float64(procs))
	}
	return float64(procs)
}

// leanCell is the Cell of BenchmarkLeanFloor on wl at procs.
func leanCell(wl string, procs int) Cell {
	return Cell{Bench: benchLean, Subject: floor, Workload: wl, Procs: procs, Unit: unitNs}
}

// leanFloor writes, where the set has BenchmarkLeanFloor rows, the floor
// and each plain store against the lean floor: how much of the floor's
// time is the driver's call, which every subject pays.
func (m *md) leanFloor() {
	s := m.s
	type point struct {
		wl    string
		procs int
	}
	var pts []point
	for _, wl := range s.Workloads {
		for _, p := range s.Procs {
			if _, ok := s.Median(leanCell(wl, p)); ok {
				pts = append(pts, point{wl, p})
			}
		}
	}
	if len(pts) == 0 {
		return
	}
	stores := s.plainStores()
	m.p("### Against the lean floor\n")
	m.p("`BenchmarkLeanFloor` is the floor's three operations written inline in `b.RunParallel` over the same keys, with no call: what an outside harness measures as its floor. The driver calls every subject, the floor included, through one interface, so `floor` ÷ lean floor is what that call (and counting the allowed calls) adds, for every subject alike; a store's ratio to the floor compares both sides with that call, its ratio to the lean floor does not. Ratios of medians, in this one run; bench/run.sh runs BenchmarkLeanFloor after BenchmarkAllow, not interleaved with it, so on a shared machine the two may have met different loads (callgrind's instruction counts, in bench/doc.go, do not move with the load).\n")
	m.p("| workload | cores | lean floor ns/op | `floor` | %s |", strings.Join(quote(stores), " | "))
	m.p("|---|---|---:|---:|%s", strings.Repeat("---:|", len(stores)))
	for _, pt := range pts {
		lean, _ := s.Median(leanCell(pt.wl, pt.procs))
		row := []string{pt.wl, m.procsLabel(pt.procs), fmtNum(lean)}
		for _, subj := range append([]string{floor}, stores...) {
			r, ok := s.ratio(allow(subj, pt.wl, pt.procs, unitNs), leanCell(pt.wl, pt.procs))
			row = append(row, fmtRatio(r, ok))
		}
		m.p("| %s |", strings.Join(row, " | "))
	}
	m.p("")
}
