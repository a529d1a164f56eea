package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate/cmd/keyrate/internal/report"
)

// reportInput is a minimal result set: two subjects, one workload, one core
// count, and a machine.txt.
const reportInput = `goos: linux
BenchmarkAllow/store=atomic/wl=hotkey 	1000	40.0 ns/op	1.000 allowed/op	0 B/op	0 allocs/op
BenchmarkAllow/store=atomic/wl=hotkey 	1000	42.0 ns/op	1.000 allowed/op	0 B/op	0 allocs/op
BenchmarkAllow/store=xrate/wl=hotkey 	1000	100.0 ns/op	1.000 allowed/op	0 B/op	0 allocs/op
BenchmarkAllow/store=xrate/wl=hotkey 	1000	104.0 ns/op	1.000 allowed/op	0 B/op	0 allocs/op
`

func TestReportWritesReport(t *testing.T) {
	in := t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "bench.txt"), []byte(reportInput), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "machine.txt"), []byte("cores: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "report")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "-o", out, in}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if got, want := stdout.String(), "wrote "+filepath.Join(out, "README.md")+"\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	md, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "- **hotkey**: `atomic`, 41.00 ns/op, 2.49× faster than xrate by the medians, too few runs to test."; !strings.Contains(string(md), want) {
		t.Errorf("README.md lacks %q:\n%s", want, md)
	}
	if _, err := os.Stat(filepath.Join(out, "throughput-hotkey.svg")); err != nil {
		t.Error(err)
	}
}

func TestReportUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "keyrate report: want one or two result sets, got 0; run 'keyrate report -h'\n"},
		{[]string{"a", "b", "c"}, "keyrate report: want one or two result sets, got 3; run 'keyrate report -h'\n"},
		{[]string{"-x"}, "keyrate report: flag provided but not defined: -x\n"},
		{[]string{"/nonexistent/results"}, "keyrate report: stat /nonexistent/results: no such file or directory\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"report"}, tc.args...), nil, &stdout, &stderr)
		if code != 2 || stderr.String() != tc.want || stdout.Len() != 0 {
			t.Errorf("report %q: exit %d, stdout %q, stderr %q; want exit 2, stderr %q",
				tc.args, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

func TestReportHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "-h"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(stdout.String(), "usage: keyrate report [-o dir] [-readme file] results [after]\n") {
		t.Errorf("help starts %q", stdout.String())
	}
}

// TestReportReadme: -readme replaces the README's marked block, and only
// it, with a paragraph of the report's figures that links to the report.
func TestReportReadme(t *testing.T) {
	in := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(in, "bench.txt"), []byte(reportInput), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(in, "machine.txt"), []byte("cores: 2\ncommit: abc1234\n"), 0o644))
	root := t.TempDir()
	readme := filepath.Join(root, "README.md")
	before := "# project\n\nIntro.\n\n" + report.ReadmeBegin + "\nstale figures\n" + report.ReadmeEnd + "\n\nMore.\n"
	require.NoError(t, os.WriteFile(readme, []byte(before), 0o644))
	out := filepath.Join(root, "docs", "bench")

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"report", "-o", out, "-readme", readme, in}, nil, &stdout, &stderr), "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "updated "+readme)
	got, err := os.ReadFile(readme)
	require.NoError(t, err)
	md := string(got)
	assert.True(t, strings.HasPrefix(md, "# project\n\nIntro.\n\n"+report.ReadmeBegin+"\n"), "the text before the block is kept:\n%s", md)
	assert.True(t, strings.HasSuffix(md, report.ReadmeEnd+"\n\nMore.\n"), "and the text after it:\n%s", md)
	assert.NotContains(t, md, "stale figures")
	assert.Contains(t, md, "**Latest full report: [docs/bench](docs/bench/README.md)** — 2 CPUs, commit abc1234;")
	assert.Contains(t, md, "`atomic` 41.00 ns/op on `hotkey` (2.49× faster than `xrate` by the medians, too few runs to test)")

	// Run again: the same README.
	require.Equal(t, 0, run([]string{"report", "-o", out, "-readme", readme, in}, nil, &stdout, &stderr))
	again, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Equal(t, md, string(again), "regenerating changes nothing")

	require.NoError(t, os.WriteFile(readme, []byte("# no markers\n"), 0o644))
	stderr.Reset()
	assert.Equal(t, 1, run([]string{"report", "-o", out, "-readme", readme, in}, nil, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "has no")
}
