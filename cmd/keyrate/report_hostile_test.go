package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate/cmd/keyrate/internal/report"
)

// The keyrate report command fed hostile and odd inputs, run as a real
// process: each ends with exit status 0 (data it skipped said on stderr
// in one line, naming the file, the line and the benchmark as the file
// spells it), 1 (the output cannot be written) or 2 (the input is no
// result set), never a panic, a hang or a report that dropped data
// without saying so.

// writeIn writes content to name in dir and returns its path.
func writeIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestReportHostileInputs(t *testing.T) {
	dir := t.TempDir()
	good := benchLines("store=atomic/wl=hotkey", 10, 40) + benchLines("store=xrate/wl=hotkey", 10, 90)
	crlf := strings.ReplaceAll(good, "\n", "\r\n")
	long := "BenchmarkAllow/store=atomic/wl=" + strings.Repeat("k", 100<<10) + " \t1000\t40 ns/op\n"
	for _, tc := range []struct {
		name, content string
		code          int
		wantErr       string // a part of stderr's one line; "" for none
	}{
		{"empty file", "", 2, "empty file.txt: no BenchmarkAllow results"},
		{"not results", "hello\nworld\n", 2, "no BenchmarkAllow results"},
		{"one run", benchLines("store=atomic/wl=hotkey", 1, 40), 0, ""},
		{"crlf", crlf, 0, ""},
		{"duplicate names", good + good, 0, ""},
		{"cut short", good + "BenchmarkAllow/store=atomic/wl=hotkey \t12\n", 0,
			"skipped 1 line (see the report's \"Lines skipped\"), the first: " + filepath.Join(dir, "cut short.txt") + ":21: "},
		{"zero ns/op", good + "BenchmarkAllow/store=mutex/wl=hotkey \t1000\t0 ns/op\n", 0,
			":21: BenchmarkAllow/store=mutex/wl=hotkey: 0 ns/op"},
		{"NaN ns/op", good + "BenchmarkAllow/store=mutex/wl=hotkey \t1000\tNaN ns/op\n", 0,
			":21: BenchmarkAllow/store=mutex/wl=hotkey: NaN ns/op"},
		{"huge ns/op", good + benchLines("store=mutex/wl=hotkey", 10, 1.7e308), 0, ""},
		{"no wl", good + "BenchmarkAllow/store=mutex \t1000\t50 ns/op\n", 0, ":21: BenchmarkAllow/store=mutex: want a wl= part"},
		{"name with spaces only", "BenchmarkAllow/store=atomic/wl=hot key \t1000\t40 ns/op\n", 2, "skipped 1 line"},
		{"equals twice and unicode", benchLines("store=atömic/wl=a=b✓", 10, 40), 0, ""},
		{"100 KiB name", good + long, 0, ":21: "},
		{"300-byte workload", benchLines("store=atomic/wl="+strings.Repeat("w", 300), 10, 40), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := writeIn(t, dir, tc.name+".txt", tc.content)
			out := filepath.Join(dir, "out-"+tc.name)
			stdout, stderr, code := keyrateProcess(t, "", "", "report", "-o", out, in)
			assert.Equal(t, tc.code, code, "exit status; stderr %.300q", stderr)
			assert.LessOrEqual(t, strings.Count(stderr, "\n"), 1, "one line on stderr: %.300q", stderr)
			assert.Less(t, len(stderr), 1000, "stderr %.300q...", stderr)
			if tc.wantErr == "" {
				assert.Empty(t, stderr)
			} else {
				assert.Contains(t, stderr, tc.wantErr)
			}
			if code == 0 {
				assert.Equal(t, "wrote "+filepath.Join(out, "README.md")+"\n", stdout)
				md, err := os.ReadFile(filepath.Join(out, "README.md"))
				require.NoError(t, err)
				assert.Equal(t, tc.wantErr != "", strings.Contains(string(md), "## Lines skipped"),
					"the report lists skipped lines exactly when stderr says some were skipped")
			}
		})
	}
}

// TestReportUnusableOutput: a results path that is a directory without
// bench.txt, or an output directory that is a file, is one line on stderr
// naming the path.
func TestReportUnusableOutput(t *testing.T) {
	dir := t.TempDir()
	in := writeIn(t, dir, "r.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
	file := writeIn(t, dir, "a-file", "x")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"results dir without bench.txt", []string{"-o", filepath.Join(dir, "o1"), dir}, 2, filepath.Join(dir, "bench.txt")},
		{"output dir a file", []string{"-o", file, in}, 1, file},
		{"readme a directory", []string{"-o", filepath.Join(dir, "o2"), "-readme", dir, in}, 1, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := keyrateProcess(t, "", "", append([]string{"report"}, tc.args...)...)
			assert.Equal(t, tc.code, code, "stderr %q", stderr)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.Contains(t, stderr, tc.wantErr)
		})
	}
}

// TestReportReadmeCRLF: -readme on a README with CRLF line endings keeps
// them, in the block it writes too: no line of the file ends in a bare
// "\n", and the "\r" after the begin marker is kept.
func TestReportReadmeCRLF(t *testing.T) {
	dir := t.TempDir()
	in := writeIn(t, dir, "r.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
	readme := writeIn(t, dir, "README.md", "# p\r\n\r\n"+report.ReadmeBegin+"\r\nold\r\n"+report.ReadmeEnd+"\r\nafter\r\n")
	_, stderr, code := keyrateProcess(t, "", "", "report", "-o", filepath.Join(dir, "rep"), "-readme", readme, in)
	require.Equal(t, 0, code, "stderr %q", stderr)
	got, err := os.ReadFile(readme)
	require.NoError(t, err)
	md := string(got)
	assert.Contains(t, md, report.ReadmeBegin+"\r\n**Latest full report")
	assert.Equal(t, strings.Count(md, "\n"), strings.Count(md, "\r\n"), "every line ends in CRLF:\n%q", md)
	assert.True(t, strings.HasSuffix(md, "\r\n"+report.ReadmeEnd+"\r\nafter\r\n"), "%q", md)
}

// TestReportReadmeAbsolute: an absolute -readme path with a relative -o
// (or the other way round) links the report relative to the README, as
// two relative paths do; not "Rel: can't make docs/x/README.md relative
// to /abs".
func TestReportReadmeAbsolute(t *testing.T) {
	dir := t.TempDir()
	in := writeIn(t, dir, "r.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
	readme := writeIn(t, dir, "README.md", report.ReadmeBegin+"\nold\n"+report.ReadmeEnd+"\n")
	t.Chdir(dir)
	for _, tc := range []struct{ name, out, readme string }{
		{"absolute readme", "docs/rep", readme},
		{"absolute output", filepath.Join(dir, "docs/rep"), "README.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := keyrateProcess(t, "", "", "report", "-o", tc.out, "-readme", tc.readme, in)
			require.Equal(t, 0, code, "stderr %q", stderr)
			got, err := os.ReadFile(readme)
			require.NoError(t, err)
			assert.Contains(t, string(got), "**Latest full report: [docs/rep](docs/rep/README.md)**")
		})
	}
}

// TestReportReadmeMarkersLine: a README with a begin marker and no end
// marker is one line on stderr naming the file and the marker's line.
func TestReportReadmeMarkersLine(t *testing.T) {
	dir := t.TempDir()
	in := writeIn(t, dir, "r.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
	readme := writeIn(t, dir, "README.md", "# p\n\n"+report.ReadmeBegin+"\nold\n")
	_, stderr, code := keyrateProcess(t, "", "", "report", "-o", filepath.Join(dir, "rep"), "-readme", readme, in)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	assert.Contains(t, stderr, readme+": line 3: the begin marker has no end marker after it")
	got, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Equal(t, "# p\n\n"+report.ReadmeBegin+"\nold\n", string(got), "the README is left as it was")
}

// TestReportKeepsOtherReadme: -o naming a directory whose README.md is
// not a keyrate report (the project's root, "-o .") is an error that
// leaves that README as it was; the report's page is named README.md,
// and it would replace the project's own.
func TestReportKeepsOtherReadme(t *testing.T) {
	dir := t.TempDir()
	in := writeIn(t, dir, "r.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
	mine := "# my project\n\nDo not lose me.\n"
	readme := writeIn(t, dir, "README.md", mine)
	_, stderr, code := keyrateProcess(t, "", "", "report", "-o", dir, in)
	assert.Equal(t, 1, code, "stderr %q", stderr)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	assert.Contains(t, stderr, readme)
	got, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Equal(t, mine, string(got), "the project's README is kept")

	// A report it wrote before is replaced.
	out := filepath.Join(dir, "rep")
	for range 2 {
		_, stderr, code = keyrateProcess(t, "", "", "report", "-o", out, in)
		require.Equal(t, 0, code, "stderr %q", stderr)
	}
}

// TestReportResultsNotFiles: a results directory whose bench.txt,
// machine.txt or peers.txt is a directory is one line naming that path and
// saying what it is, with no made-up line number (":0:").
func TestReportResultsNotFiles(t *testing.T) {
	for _, name := range []string{"bench.txt", "machine.txt", "peers.txt"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			results := filepath.Join(dir, "results")
			if name != "bench.txt" {
				writeIn(t, results, "bench.txt", benchLines("store=atomic/wl=hotkey", 10, 40))
			}
			require.NoError(t, os.MkdirAll(filepath.Join(results, name), 0o755))
			var stdout, stderr strings.Builder
			code := runReport([]string{"-o", filepath.Join(dir, "out"), results}, &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr %q", stderr.String())
			assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
			assert.Contains(t, stderr.String(), filepath.Join(results, name)+" is a directory")
			assert.NotContains(t, stderr.String(), ":0:")
			assert.Empty(t, stdout.String())
		})
	}
}
