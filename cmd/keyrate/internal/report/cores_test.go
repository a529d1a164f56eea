package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coreSet is a set from an 8-core machine at -cpu 1 to 16: on hotkey
// striped is fastest at -cpu 1 and atomic from 2 to 8, while at the
// oversubscribed 16 striped would win again; on hotkey-deny atomic is 50×
// faster than the lock stores everywhere. floor halves its time with each
// doubling of the cores; so does atomic on hotkey-deny. striped/keys=hashed
// is measured by BenchmarkMemory only.
func coreSet(t *testing.T) *Set {
	t.Helper()
	ns := map[string]map[string][]float64{ // subject → workload → ns/op at 1, 2, 4, 8, 16
		"floor":   {"hotkey": {100, 50, 25, 12.5, 12.5}, "hotkey-deny": {100, 50, 25, 12.5, 12.5}},
		"mutex":   {"hotkey": {120, 130, 140, 150, 150}, "hotkey-deny": {300, 300, 300, 300, 300}},
		"striped": {"hotkey": {80, 160, 200, 300, 40}, "hotkey-deny": {320, 320, 320, 320, 320}},
		"atomic":  {"hotkey": {100, 100, 100, 100, 100}, "hotkey-deny": {6, 6, 6, 6, 6}},
	}
	var b strings.Builder
	for _, subj := range []string{"mutex", "striped", "atomic", "floor"} {
		for _, wl := range []string{"hotkey", "hotkey-deny"} {
			for i, p := range []int{1, 2, 4, 8, 16} {
				b.WriteString(lines("store="+subj+"/wl="+wl, p, 6, ns[subj][wl][i], 0))
			}
		}
	}
	b.WriteString(memLines("striped/keys=hashed", 3, 34, 1e6))
	s, err := Read(strings.NewReader(b.String()), "cores")
	require.NoError(t, err)
	s.Machine = []Fact{{"cores", "8"}}
	return s
}

// section returns the markdown section of md that begins with head, up to
// the next section of the same level.
func section(t *testing.T, md, head string) string {
	t.Helper()
	i := strings.Index(md, head+"\n")
	require.GreaterOrEqual(t, i, 0, "the report has %q", head)
	level := strings.SplitN(head, " ", 2)[0]
	rest := md[i+len(head):]
	if j := strings.Index(rest, "\n"+level+" "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestCoresPicksByRange: the picks are grouped over consecutive core
// counts, leave out the oversubscribed one, and list every store's median
// at the most cores that fit; a broken grouping, a pick at -cpu 16 or a
// missing figure fails it.
func TestCoresPicksByRange(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, coreSet(t))
	sec := section(t, buf.String(), "## Across core counts")
	assert.Contains(t, sec, "- **hotkey**: `striped` at -cpu 1; `atomic` at -cpu 2 to 8. At -cpu 8: `atomic` 102.5, `mutex` 152.5, `striped` 302.5 ns/op; the slowest takes 3.0× the fastest's time.")
	assert.Contains(t, sec, "- **hotkey-deny**: `atomic` at -cpu 1 to 8. At -cpu 8: `atomic` 8.500, `mutex` 302.5, `striped` 322.5 ns/op; the slowest takes 37.9× the fastest's time.")
	assert.Contains(t, sec, "- -cpu 1: fastest `striped` on hotkey; `atomic` on hotkey-deny; slowest `mutex` on hotkey; `striped` on hotkey-deny.")
	assert.Contains(t, sec, "- -cpu 2 to 8: fastest `atomic` on hotkey, hotkey-deny; slowest `striped` on hotkey, hotkey-deny. Pick `atomic`: fastest on 2 of 2, slowest on none; `striped` is the slowest on all 2.")
	assert.NotContains(t, sec, "at -cpu 16", "an oversubscribed run is no pick")
	assert.NotContains(t, sec, "keys=hashed", "a store without BenchmarkAllow rows has no row")
}

// TestCoresScalingTable: each cell is the subject's throughput at N over
// its own at 1, with its time against the floor's at N; the -cpu 1 column
// is the throughput itself. Swapping the ratio (ns at N over ns at 1) or
// comparing with the floor at -cpu 1 fails it.
func TestCoresScalingTable(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, coreSet(t))
	sec := section(t, buf.String(), "### Scaling: 1 → N cores")
	hot := section(t, sec, "#### wl=hotkey")
	assert.Contains(t, hot, "| `floor` | 9.756 M/s | 1.95× | 3.73× | 6.83× | 6.83× |")
	// striped: 82.5 ns at 1, 162.5 at 2 (0.51×), against floor's 52.5 at 2.
	assert.Contains(t, hot, "| `striped` | 12.12 M/s (0.80× floor) | 0.51× (3.10× floor) |")
	deny := section(t, sec, "#### wl=hotkey-deny")
	assert.Contains(t, deny, "| `atomic` | 117.6 M/s (0.08× floor) | 1.00× (0.16× floor) |")
}

// TestNoCoresSectionOnTwoCores: a set with two core counts that fit the
// machine (the 2-core reports) is written as before: no section on core
// counts, a linear axis and the floor drawn as any baseline.
func TestNoCoresSectionOnTwoCores(t *testing.T) {
	s := fixture(t)
	require.False(t, s.manyCores())
	var buf bytes.Buffer
	Markdown(&buf, s)
	assert.NotContains(t, buf.String(), "## Across core counts")
	assert.NotContains(t, buf.String(), "ideal line")
	var svg bytes.Buffer
	require.NoError(t, writeChart(&svg, s, "hotkey", "svg"))
	assert.NotContains(t, svg.String(), "floor (ideal)")
	assert.NotContains(t, svg.String(), "log scale")
}

// TestManyCoresChart: a set that shows scaling puts the core counts on a
// log₂ axis and names the floor's line as the ideal.
func TestManyCoresChart(t *testing.T) {
	s := coreSet(t)
	require.True(t, s.manyCores())
	var svg bytes.Buffer
	require.NoError(t, writeChart(&svg, s, "hotkey", "svg"))
	assert.Contains(t, svg.String(), "floor (ideal)")
	assert.Contains(t, svg.String(), "log scale")
	assert.Equal(t, 3.0, s.chartX(8))
}

// TestMemoryOnlyStoreIsNotMissingEverywhere: a store variant measured by
// BenchmarkMemory only is one "not measured" line in a target, not one a
// workload and core count, and has no column in the ratio tables.
func TestMemoryOnlyStoreIsNotMissingEverywhere(t *testing.T) {
	s := coreSet(t)
	for _, v := range Targets(s) {
		n := 0
		for _, f := range v.Figures {
			if strings.Contains(f, "striped/keys=hashed") && strings.Contains(f, "-cpu") {
				n++
			}
		}
		assert.Zero(t, n, "%s: %v", v.Target, v.Figures)
	}
	var buf bytes.Buffer
	Markdown(&buf, s)
	assert.NotContains(t, section(t, buf.String(), "## Each store against the baselines"), "keys=hashed")
}

// TestLoadPeers: a results folder with peers.txt gets a section of its
// own with each library's ratio to the harness's floor, and a chart per
// workload; its skipped lines are the set's too. Without the file,
// nothing changes.
func TestLoadPeers(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for _, subj := range []string{"floor", "atomic"} {
		b.WriteString(lines("store="+subj+"/wl=hotkey", 1, 6, 100, 0))
		b.WriteString(lines("store="+subj+"/wl=hotkey", 2, 6, 100, 0))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(b.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "machine.txt"), []byte("cores: 2\n"), 0o644))

	s, err := Load(dir)
	require.NoError(t, err)
	assert.Nil(t, s.Peers, "no peers.txt")

	var p strings.Builder
	for subj, ns := range map[string]float64{"floor": 70, "sethvargo": 140, "keyrate-atomic": 70} {
		p.WriteString(lines("peer="+subj+"/wl=zipf-1M", 1, 5, ns, 0))
	}
	p.WriteString("BenchmarkAllow/peer=throttled/wl=zipf-1M \t1000\tNaN ns/op\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, PeersFile), []byte(p.String()), 0o644))
	s, err = Load(dir)
	require.NoError(t, err)
	require.NotNil(t, s.Peers)
	assert.Equal(t, []string{"zipf-1M"}, s.Peers.Workloads)
	assert.Len(t, s.Warnings, 1, "the peers' skipped line is the set's")

	out := filepath.Join(t.TempDir(), "r")
	require.NoError(t, Write(out, s))
	md, err := os.ReadFile(filepath.Join(out, ReportFile))
	require.NoError(t, err)
	sec := section(t, string(md), "## Beside other libraries (peers.txt)")
	assert.Contains(t, sec, "| `sethvargo` | 142.0 (1.97×) |")
	assert.Contains(t, sec, "| `floor` | 72.00 |")
	assert.Contains(t, sec, "(peers-throughput-zipf-1M.svg)")
	_, err = os.Stat(filepath.Join(out, "peers-throughput-zipf-1M.svg"))
	assert.NoError(t, err)
}

// TestLeanFloorRows: BenchmarkLeanFloor rows are read as a figure beside
// the floor, never as a subject, workload or core count of their own, and
// the report gives every store's and the floor's ratio to them, in the
// floor targets too. Reading them as a subject, or dividing the other way,
// fails it.
func TestLeanFloorRows(t *testing.T) {
	var b strings.Builder
	for subj, ns := range map[string]float64{"floor": 110, "atomic": 121, "mutex": 150} {
		for _, p := range []int{1, 2} {
			b.WriteString(lines("store="+subj+"/wl=hotkey", p, 6, ns, 0))
		}
	}
	for _, p := range []int{1, 2} {
		b.WriteString(strings.ReplaceAll(lines("wl=hotkey", p, 6, 100, 0), "BenchmarkAllow/", "BenchmarkLeanFloor/"))
	}
	s, err := Read(strings.NewReader(b.String()), "lean")
	require.NoError(t, err)
	assert.NotContains(t, s.Subjects, "leanfloor")
	assert.Len(t, s.Subjects, 3)
	assert.Equal(t, []string{"hotkey"}, s.Workloads)
	assert.Equal(t, []int{1, 2}, s.Procs)
	lean, ok := s.Median(leanCell("hotkey", 2))
	require.True(t, ok)
	assert.Equal(t, 102.5, lean)

	var buf bytes.Buffer
	Markdown(&buf, s)
	sec := section(t, buf.String(), "### Against the lean floor")
	assert.Contains(t, sec, "| hotkey | -cpu 1 | 102.5 | 1.10× | ")
	assert.Contains(t, sec, "1.20×") // atomic: 123.5 ÷ 102.5
	assert.Contains(t, buf.String(), "hotkey -cpu 1: 1.10× (1.20× the lean floor)")
}

// TestRankAtPicksOnlyAStoreNeverSlowest: the store fastest on the most
// workloads is no pick where it is the slowest on another; a pick that
// ignored the slowest list, or counted ties as wins, fails it.
func TestRankAtPicksOnlyAStoreNeverSlowest(t *testing.T) {
	ns := map[string][]float64{ // mutex, striped, atomic on a, b, c
		"a": {10, 20, 30}, "b": {10, 20, 30}, "c": {30, 20, 10},
	}
	var b strings.Builder
	for wl, v := range ns {
		for i, st := range []string{"mutex", "striped", "atomic"} {
			b.WriteString(lines("store="+st+"/wl="+wl, 1, 6, v[i], 0))
		}
	}
	s, err := Read(strings.NewReader(b.String()), "rank")
	require.NoError(t, err)
	got := s.rankAt(1)
	assert.NotContains(t, got, "Pick", "mutex wins 2 of 3 but is the slowest on c")
	assert.Contains(t, got, "fastest `mutex` on ")
}
