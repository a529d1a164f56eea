package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainProcess is not a test: run by keyrateProcess in a child process
// of the test binary, it is the keyrate command, its arguments after
// "--", so that the tests below run the real main: its os.Exit, its
// os.Stdin, os.Stdout and os.Stderr.
func TestMainProcess(t *testing.T) {
	if os.Getenv("KEYRATE_TEST_MAIN") != "1" {
		t.Skip("the keyrate command, for the process tests")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Args = append([]string{"keyrate"}, args...)
	main()
}

// keyrateProcess runs keyrate args in a child process with stdin read
// from the file stdin ("" for none) and stdout written to the file
// stdout ("" for a buffer), and returns its stdout (from the buffer),
// stderr and exit status.
func keyrateProcess(t *testing.T, stdin, stdout string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestMainProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "KEYRATE_TEST_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if stdout != "" {
		f, err := os.OpenFile(stdout, os.O_WRONLY, 0)
		if err != nil {
			t.Skipf("%s: %v", stdout, err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee) && ee.Exited():
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("keyrate %q: %v", args, err)
	return "", "", 0
}

// TestProcessExitStatus: the real command's exit status and output, for
// what its documentation promises: 0 and the decisions for good input; 2
// and one line on stderr naming the line for bad input (a BOM, a NUL in a
// number, CR-only line ends); 1 and one line when stdin cannot be read (a
// directory) or stdout cannot be written (/dev/full); 2 for a bad flag of
// each command; and a results file with a NaN value reported, not hung on.
func TestProcessExitStatus(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good.in", "2\n10\n3\nrequest a\x00b 0\nrequest a\x00b 0\nrequest a\x00b 0\n")
	for _, tc := range []struct {
		name, stdin, stdout string
		args                []string
		code                int
		wantOut, wantErr    string // wantErr: the start of stderr's one line
	}{
		{"replay", good, "", []string{"replay"}, 0, "allow\nallow\ndeny\n", ""},
		{"replay BOM", file("bom.in", "\ufeff2\n10\n0\n"), "", []string{"replay"}, 2, "", `line 1: capacity "\ufeff2" is not an integer`},
		{"replay NUL in a number", file("nul.in", "2\n1\x000\n0\n"), "", []string{"replay"}, 2, "", `line 2: window "1\x000" is not an integer`},
		{"replay CR line ends", file("cr.in", "2\r10\r0\r"), "", []string{"replay"}, 2, "", `line 1: extra field "10" after the capacity`},
		{"replay stdin a directory", dir, "", []string{"replay"}, 1, "", "read "},
		{"replay stdout full", good, "/dev/full", []string{"replay"}, 1, "", "keyrate replay: write "},
		{"replay bad flag", good, "", []string{"replay", "-store", "redis"}, 2, "", `keyrate replay: invalid value "redis" for flag -store`},
		{"serve bad flag", "", "", []string{"serve", "-rate", "0"}, 2, "", "keyrate serve: keyrate: invalid limit: Rate 0 is below 1"},
		{"report missing", "", "", []string{"report", "-o", dir, filepath.Join(dir, "none")}, 2, "", "keyrate report: stat "},
		{"report NaN", "", "", []string{"report", "-o", filepath.Join(dir, "rep"),
			file("nan.txt", benchLines("store=atomic/wl=hotkey", 10, 100)+"BenchmarkAllow/store=atomic/wl=hotkey \t1000\tNaN ns/op\n"+
				benchLines("store=atomic/policy=2windows/wl=hotkey", 10, 130))}, 0, "wrote " + filepath.Join(dir, "rep", "README.md") + "\n",
			"keyrate report: " + filepath.Join(dir, "nan.txt") + `: skipped 1 line (see the report's "Lines skipped"), the first: ` + filepath.Join(dir, "nan.txt") + ":11: BenchmarkAllow/store=atomic/wl=hotkey: NaN ns/op is not a finite number"},
		{"unknown command", "", "", []string{"frobnicate"}, 2, "", `keyrate: unknown command "frobnicate"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := keyrateProcess(t, tc.stdin, tc.stdout, tc.args...)
			if code != tc.code || stdout != tc.wantOut {
				t.Errorf("status %d, stdout %q; want %d, %q (stderr %q)", code, stdout, tc.code, tc.wantOut, stderr)
			}
			if tc.wantErr == "" && stderr != "" || !strings.HasPrefix(stderr, tc.wantErr) || strings.Count(stderr, "\n") > 1 {
				t.Errorf("stderr %q, want one line starting %q", stderr, tc.wantErr)
			}
		})
	}
}

// benchLines returns n BenchmarkAllow lines of name at ns/op ns, ns+1, ...
func benchLines(name string, n int, ns float64) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "BenchmarkAllow/%s \t1000\t%g ns/op\n", name, ns+float64(i))
	}
	return b.String()
}
