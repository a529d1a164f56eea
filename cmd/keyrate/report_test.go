package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if want := "- **hotkey**: `atomic`, 41.00 ns/op, 2.49× faster than xrate."; !strings.Contains(string(md), want) {
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
	if !strings.HasPrefix(stdout.String(), "usage: keyrate report [-o dir] results [after]\n") {
		t.Errorf("help starts %q", stdout.String())
	}
}
