package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The markers around the block of a project README that Brief's paragraph
// fills (see UpdateReadme): everything between them is generated.
const (
	ReadmeBegin = "<!-- keyrate report -readme: generated from the report below; do not edit -->"
	ReadmeEnd   = "<!-- end of keyrate report -readme -->"
)

// Brief writes the paragraph a project README quotes from the report on s,
// whose page is at link: the machine and commit, the fastest store by
// workload count and a few of its figures, the leanest store, and how many
// targets were met. Every number in it is computed from s, as the
// report's are, so a README that quotes only Brief cannot disagree with
// its report.
func Brief(w io.Writer, link string, s *Set) {
	fit := s.fitProcs()
	if len(fit) == 0 {
		fit = s.Procs
	}
	dir := strings.TrimSuffix(strings.TrimSuffix(link, ReportFile), "/")
	var b strings.Builder
	fmt.Fprintf(&b, "**Latest full report: [%s](%s)**", dir, link)
	var facts []string
	if d := s.Fact("date"); d != "" {
		facts = append(facts, d[:min(len(d), 10)])
	}
	if c := s.Fact("cpu"); c != "" {
		facts = append(facts, c)
	}
	if n := s.Cores(); n > 0 {
		facts = append(facts, fmt.Sprintf("%d CPUs", n))
	}
	if g := s.Fact("go"); g != "" {
		if f := strings.Fields(g); len(f) >= 3 {
			g = f[2]
		}
		facts = append(facts, g)
	}
	if c := s.Fact("commit"); c != "" {
		facts = append(facts, "commit "+strings.Fields(c)[0])
	}
	if len(facts) > 0 {
		fmt.Fprintf(&b, " — %s; the exact commands are in the report.", strings.Join(facts, ", "))
	} else {
		b.WriteString(".")
	}
	if len(fit) > 0 {
		top := fit[len(fit)-1]
		wins := map[string]int{}
		var examples []string
		for _, wl := range s.Workloads {
			best, _, _, ok := s.fastest(wl, top)
			if !ok {
				continue
			}
			wins[best]++
			if len(examples) < 3 {
				ns, _ := s.Median(allow(best, wl, top, unitNs))
				ex := fmt.Sprintf("`%s` %s ns/op on `%s`", best, fmtNum(ns), wl)
				if x, ok := s.ratio(allow(xrate, wl, top, unitNs), allow(best, wl, top, unitNs)); ok {
					ex += fmt.Sprintf(" (%s than `xrate`)", fmtSpeed(x))
				}
				examples = append(examples, ex)
			}
		}
		stores := slices.Clone(s.plainStores())
		slices.SortStableFunc(stores, func(a, b string) int { return wins[b] - wins[a] })
		var parts []string
		for _, st := range stores {
			if wins[st] > 0 {
				parts = append(parts, fmt.Sprintf("`%s` on %d", st, wins[st]))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, " At `-cpu %d` the fastest store, by workload count: %s of %d workloads; for example %s.",
				top, strings.Join(parts, ", "), len(s.Workloads), strings.Join(examples, ", "))
		}
	}
	if st, perKey := s.leanest(s.plainStores()); st != "" {
		fmt.Fprintf(&b, " Leanest in memory: `%s`, %.1f B/key with a million keys.", st, perKey)
	}
	met, unmeasured, vs := 0, 0, Targets(s)
	for _, v := range vs {
		switch {
		case v.Met:
			met++
		case !v.Measured:
			unmeasured++
		}
	}
	fmt.Fprintf(&b, " %d of the %d targets are met", met, len(vs))
	if unmeasured > 0 {
		fmt.Fprintf(&b, " (%d not measured by these results)", unmeasured)
	}
	b.WriteString("; the report says which are not and by how much. Absolute times on a shared machine move by tens of percent between runs: compare stores within one run.")
	fmt.Fprintln(w, b.String())
}

// UpdateReadme returns readme with the text between ReadmeBegin and
// ReadmeEnd replaced by brief, or an error if readme lacks the markers.
func UpdateReadme(readme []byte, brief string) ([]byte, error) {
	i := bytes.Index(readme, []byte(ReadmeBegin))
	j := bytes.Index(readme, []byte(ReadmeEnd))
	if i < 0 || j < i {
		return nil, fmt.Errorf("report: the README has no %q line followed by %q", ReadmeBegin, ReadmeEnd)
	}
	var out bytes.Buffer
	out.Write(readme[:i+len(ReadmeBegin)])
	out.WriteString("\n" + strings.TrimSpace(brief) + "\n")
	out.Write(readme[j:])
	return out.Bytes(), nil
}
