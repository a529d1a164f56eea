package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile and odd result files: every line Read does not keep is a
// warning naming its file, its line and the benchmark as the results
// file spells it (with its Benchmark prefix, so that a user can grep for
// it); nothing is dropped without one, and nothing it keeps makes the
// report say what the numbers do not.

// readOK reads in as file name and fails the test on an error.
func readOK(t *testing.T, in, name string) *Set {
	t.Helper()
	s, err := Read(strings.NewReader(in), name)
	require.NoError(t, err)
	return s
}

// TestWarningsNameBenchmark: a skipped line's warning names the benchmark
// as the file has it, BenchmarkAllow/..., BenchmarkRedis/...,
// BenchmarkHotKey/..., and its file and line.
func TestWarningsNameBenchmark(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 1, 3, 40, 0) +
		"BenchmarkAllow/store=atomic/wl=hotkey \t1000\tNaN ns/op\n" + // line 4
		"BenchmarkRedis/op=allow-2 \t10\t1 ns/op\n" + // line 5: no clients=
		"BenchmarkHotKey/op=allow-2 \t10\t1 ns/op\n" // line 6: no leases=
	s := readOK(t, in, "r.txt")
	require.Len(t, s.Warnings, 3, "warnings %q", s.Warnings)
	for i, want := range []string{
		"r.txt:4: BenchmarkAllow/store=atomic/wl=hotkey: ",
		"r.txt:5: BenchmarkRedis/op=allow-2: ",
		"r.txt:6: BenchmarkHotKey/op=allow-2: ",
	} {
		assert.True(t, strings.HasPrefix(s.Warnings[i], want), "warning %d = %q, want it to start %q", i, s.Warnings[i], want)
	}
}

// TestReadSkipsImpossibleValues: a time per call of zero or below, or any
// negative figure, is no measurement (a hand-edited or corrupted file): it
// is skipped with a warning, never a store "-45.50 ns/op" and fastest.
func TestReadSkipsImpossibleValues(t *testing.T) {
	for _, tc := range []struct{ value, unit string }{
		{"0", "ns/op"}, {"-45", "ns/op"}, {"-1", "B/op"}, {"-3", "allocs/op"},
	} {
		t.Run(tc.value+tc.unit, func(t *testing.T) {
			in := lines("store=mutex/wl=hotkey", 1, 10, 50, 0) +
				"BenchmarkAllow/store=atomic/wl=hotkey \t1000\t"
			if tc.unit == "ns/op" {
				in += tc.value + " ns/op\n"
			} else {
				in += "40 ns/op\t" + tc.value + " " + tc.unit + "\n"
			}
			s := readOK(t, in, "bad.txt")
			require.Len(t, s.Warnings, 1, "warnings %q", s.Warnings)
			assert.Contains(t, s.Warnings[0], "bad.txt:11: BenchmarkAllow/store=atomic/wl=hotkey: "+tc.value+" "+tc.unit)
			_, kept := s.Median(allow("atomic", "hotkey", 1, unitNs))
			assert.False(t, kept, "the line's ns/op was kept")
		})
	}
}

// TestReadWarnsMissingParts: a BenchmarkAllow line without a wl= part,
// or a BenchmarkAllow or BenchmarkMemory line without a store= part, has
// no row in any table: it is a warning, not data dropped in silence.
func TestReadWarnsMissingParts(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 1, 3, 40, 0) +
		"BenchmarkAllow/store=mutex \t1000\t50 ns/op\n" + // line 4
		"BenchmarkAllow/wl=hotkey \t1000\t50 ns/op\n" + // line 5
		"BenchmarkMemory/keys=1M-2 \t1\t1000 ns/op\t40 B/key\n" // line 6
	s := readOK(t, in, "parts.txt")
	require.Len(t, s.Warnings, 3, "warnings %q", s.Warnings)
	assert.Contains(t, s.Warnings[0], "parts.txt:4: BenchmarkAllow/store=mutex: want a wl= part")
	assert.Contains(t, s.Warnings[1], "parts.txt:5: BenchmarkAllow/wl=hotkey: want a store= part")
	assert.Contains(t, s.Warnings[2], "parts.txt:6: BenchmarkMemory/keys=1M-2: want a store= part")
	assert.Equal(t, []string{"atomic"}, s.Subjects)
}

// TestReadLongLine: a line longer than the benchmark format reader's
// 64 KiB (a 100 KiB sub-benchmark name) is skipped with a warning naming
// its line and the bound, and the lines after it are read; not a fatal
// "file:0: bufio.Scanner: token too long".
func TestReadLongLine(t *testing.T) {
	long := "BenchmarkAllow/store=atomic/wl=" + strings.Repeat("k", 100<<10) + " \t1000\t40 ns/op\n"
	in := lines("store=atomic/wl=hotkey", 1, 3, 40, 0) + long + lines("store=mutex/wl=hotkey", 1, 3, 50, 0)
	s := readOK(t, in, "long.txt")
	require.Len(t, s.Warnings, 1, "warnings %.300q", s.Warnings)
	assert.Contains(t, s.Warnings[0], "long.txt:4: ")
	assert.Contains(t, s.Warnings[0], "65536")
	assert.Less(t, len(s.Warnings[0]), 300, "the warning quotes the whole line")
	assert.Equal(t, []string{"atomic", "mutex"}, s.Subjects, "the lines after the long one are read")
}

// TestReadLongNameWarning: a warning quotes at most the start of a long
// benchmark name, so that it stays one readable line on stderr.
func TestReadLongNameWarning(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 1, 3, 40, 0) +
		"BenchmarkAllow/store=atomic/wl=" + strings.Repeat("w", 60000) + " \t1000\tNaN ns/op\n"
	s := readOK(t, in, "n.txt")
	require.Len(t, s.Warnings, 1)
	assert.Less(t, len(s.Warnings[0]), 400, "warning %.200q...", s.Warnings[0])
	assert.Contains(t, s.Warnings[0], "n.txt:4: BenchmarkAllow/store=atomic/wl=www")
}

// TestReadNoResultsSaysWhy: a file whose every line was skipped (a
// sub-benchmark name with a space, which ends the name in the benchmark
// format) is an error that says so, not a bare "no BenchmarkAllow
// results" while the skipped lines go unmentioned.
func TestReadNoResultsSaysWhy(t *testing.T) {
	in := "BenchmarkAllow/store=atomic/wl=hot key \t1000\t40 ns/op\n" +
		"BenchmarkAllow/store=atomic/wl=hot key \t1000\t41 ns/op\n"
	_, err := Read(strings.NewReader(in), "space.txt")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "space.txt: no BenchmarkAllow results")
	assert.Contains(t, err.Error(), "skipped 2 lines")
	assert.Contains(t, err.Error(), "space.txt:1:")
	assert.NotContains(t, err.Error(), "\n")
}

// TestWriteOddWorkloadNames: a workload name that is no file name (a NUL,
// 300 bytes, a backslash) still gets its chart, in a file whose name is
// safe, distinct from every other workload's, and linked from the report.
func TestWriteOddWorkloadNames(t *testing.T) {
	names := []string{"ho\x00t", strings.Repeat("w", 300), `a\b`, "a?b", "hot key", "hötkey✓", "a=b"}
	var b strings.Builder
	for _, wl := range names {
		// Spaces end a benchmark name: the results would not hold one.
		if strings.Contains(wl, " ") {
			continue
		}
		b.WriteString(lines("store=atomic/wl="+wl, 1, 6, 40, 0))
	}
	s := readOK(t, b.String(), "odd.txt")
	dir := t.TempDir()
	require.NoError(t, Write(dir, s))
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	require.NoError(t, err)
	seen := map[string]string{}
	for _, wl := range s.Workloads {
		f := chartFile(wl)
		assert.LessOrEqual(t, len(f), 120, "chart file of %.40q", wl)
		for _, r := range f {
			assert.True(t, r < 0x80 && r != '/' && r != '\\' && r > ' ', "chart file %q of %q has %q", f, wl, r)
		}
		if other, dup := seen[f]; dup {
			t.Errorf("workloads %q and %q share the chart file %q", other, wl, f)
		}
		seen[f] = wl
		_, err := os.Stat(filepath.Join(dir, f))
		assert.NoError(t, err)
		assert.Contains(t, string(md), "("+f+")", "the report links %s", f)
	}
	// The workloads keyrate's benchmarks run keep their names.
	for _, wl := range []string{"hotkey", "uniform-1M-idle", "cost-mix", "zipf-1M"} {
		assert.Equal(t, "throughput-"+wl+".svg", chartFile(wl))
	}
}

// TestChartFewRuns: with fewer than six runs a median has no 95%
// interval; the chart still draws every point (without its error bar, and
// says so), not an empty plot.
func TestChartFewRuns(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("runs=%d", n), func(t *testing.T) {
			s := readOK(t, lines("store=atomic/wl=hotkey", 1, n, 40, 0)+lines("store=xrate/wl=hotkey", 1, n, 90, 0), "few")
			var svg bytes.Buffer
			require.NoError(t, writeChart(&svg, s, "hotkey", "svg"))
			for _, want := range []string{">atomic<", ">xrate<", "no error bars"} {
				assert.True(t, strings.Contains(svg.String(), want), "the chart lacks %q", want)
			}
			var md bytes.Buffer
			Markdown(&md, s)
			assert.True(t, strings.Contains(md.String(), "fewer than 6 runs"), "the report does not say the charts have no error bars")
		})
	}
	// Six runs have an interval: no such note.
	s := readOK(t, lines("store=atomic/wl=hotkey", 1, 6, 40, 0), "six")
	var svg bytes.Buffer
	require.NoError(t, writeChart(&svg, s, "hotkey", "svg"))
	assert.False(t, strings.Contains(svg.String(), "no error bars"), "a chart of six runs says it has no error bars")
}

// TestFmtNumHuge: a huge figure (a corrupted file's 1.7e308 ns/op) is
// printed in a few characters, not as 309 digits.
func TestFmtNumHuge(t *testing.T) {
	assert.Equal(t, "1.7e+308", fmtNum(1.7e308))
	assert.Equal(t, "-2.5e+12", fmtNum(-2.5e12))
	assert.Equal(t, "999999999", fmtNum(999999999))
	assert.Equal(t, "1246", fmtNum(1246.3))
}

// TestLinesSkippedBackticks: a skipped line whose name holds backticks is
// listed in one code span that they do not end early.
func TestLinesSkippedBackticks(t *testing.T) {
	s := readOK(t, lines("store=atomic/wl=hotkey", 1, 3, 40, 0)+
		"BenchmarkAllow/store=at`o``mic/wl=hotkey \t1000\tNaN ns/op\n", "tick.txt")
	require.Len(t, s.Warnings, 1)
	var buf bytes.Buffer
	Markdown(&buf, s)
	assert.Contains(t, buf.String(), "\n- ``` "+s.Warnings[0]+" ```\n")
}

// zeros is an endless stream of NUL bytes, as /dev/zero gives, that
// counts what it gave.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += len(p)
	return len(p), nil
}

// TestReadEndlessLine: a line with no end (keyrate report /dev/zero) is
// an error after a bounded read, naming its line and the bound, not a
// read that never returns.
func TestReadEndlessLine(t *testing.T) {
	z := &zeros{}
	done := make(chan error, 1)
	go func() {
		_, err := Read(io.LimitReader(z, 1<<30), "zero")
		done <- err
	}()
	err := <-done
	require.Error(t, err)
	assert.Contains(t, err.Error(), "zero:1: a line of more than 16777216 bytes")
	assert.Less(t, z.n, 32<<20, "read %d bytes before giving up", z.n)
}

// TestLineLimiterEnds: the line filter passes a last line without its
// newline, and replaces a long last line without one by an empty line,
// keeping every other byte and the line count.
func TestLineLimiterEnds(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	for in, want := range map[string]string{
		"a\nb":              "a\nb",
		"a\r\nb\r\n":        "a\r\nb\r\n",
		"a\n" + long:        "a\n\n",
		long + "\nb\n":      "\nb\n",
		"":                  "",
		"\n\n":              "\n\n",
		"a\n" + long + "\n": "a\n\n",
	} {
		l := newLineLimiter(strings.NewReader(in))
		got, err := io.ReadAll(l)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "input of %d bytes", len(in))
		assert.Equal(t, strings.Count(want, "\n")+boolInt(want != "" && !strings.HasSuffix(want, "\n")), l.line, "lines of %.20q", in)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
