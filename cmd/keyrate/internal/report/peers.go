package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// PeersFile is an outside harness's results that a result directory may
// hold beside bench.txt: BenchmarkAllow/peer=<library>/wl=<workload> rows
// from a driver of its own, with other libraries beside keyrate's stores
// and a floor of its own (see bench/results/2026-11-27-xeon-16/README.md).
// The report shows them in a section of their own, never mixed with the
// project's rows.
const PeersFile = "peers.txt"

// loadPeers reads dir's PeersFile, naming each peer= value as Read names a
// store= value; nil if dir has none. Its machine is the set's.
func loadPeers(dir string, machine []Fact) (*Set, error) {
	path := filepath.Join(dir, PeersFile)
	f, err := openFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	b = bytes.ReplaceAll(b, []byte("BenchmarkAllow/peer="), []byte("BenchmarkAllow/store="))
	p, err := Read(bytes.NewReader(b), filepath.ToSlash(filepath.Clean(path)))
	if err != nil {
		return nil, err
	}
	p.Machine = machine
	return p, nil
}

// peersChartFile is the file of the peers' chart of workload wl.
func peersChartFile(wl string) string { return "peers-" + chartFile(wl) }

// peers writes the outside harness's results (see PeersFile), if the set
// has them: per workload, each library's median ns/op at each core count
// and its ratio to the harness's own floor, which library is fastest over
// which core counts, and a chart.
func (m *md) peers() {
	ps := m.s.Peers
	if ps == nil {
		return
	}
	pm := &md{w: m.w, s: ps}
	m.p("## Beside other libraries (%s)\n", PeersFile)
	m.p("From `%s`: an outside harness's own driver, keys and floor (its README says how it ran), with other libraries beside keyrate's stores. Compare its rows with one another, not with the tables above, which another driver measured. Each cell: the median ns/op, then in brackets its ratio to the harness's `floor` at the same core count. Medians of %s each.\n", ps.Label, pm.runs())
	fit := ps.fitProcs()
	for _, wl := range ps.Workloads {
		m.p("### wl=%s\n", wl)
		var head []string
		for _, p := range ps.Procs {
			head = append(head, pm.procsLabel(p))
		}
		m.p("| library | %s |", strings.Join(head, " | "))
		m.p("|---|%s", strings.Repeat("---:|", len(ps.Procs)))
		for _, subj := range ps.allowSubjects(wl) {
			row := []string{"`" + subj + "`"}
			for _, p := range ps.Procs {
				ns, ok := ps.Median(allow(subj, wl, p, unitNs))
				if !ok {
					row = append(row, "—")
					continue
				}
				cell := fmtNum(ns)
				if subj != floor {
					if f, okF := ps.ratio(allow(subj, wl, p, unitNs), allow(floor, wl, p, unitNs)); okF {
						cell += fmt.Sprintf(" (%s)", fmtRatio(f, true))
					}
				}
				row = append(row, cell)
			}
			m.p("| %s |", strings.Join(row, " | "))
		}
		m.p("")
		var parts []string
		for _, g := range spans(fit, func(p int) string { return ps.pickAt(wl, p) }) {
			parts = append(parts, g.text+" at "+procsRange(g.procs))
		}
		if len(parts) > 0 {
			m.p("Fastest (Mann-Whitney U between the two fastest, floor left out): %s.\n", strings.Join(parts, "; "))
		}
		m.p("![peers' throughput, wl=%s](%s)\n", wl, peersChartFile(wl))
	}
	pm.oversubNote()
}
