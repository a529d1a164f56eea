package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// testCommands is a dispatch table independent of which subcommands this
// build registers: "echo" prints its arguments and stdin and exits with 3.
var testCommands = map[string]command{
	"echo": {
		run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			in, _ := io.ReadAll(stdin)
			fmt.Fprintf(stdout, "args %q stdin %q\n", args, in)
			fmt.Fprintln(stderr, "to stderr")
			return 3
		},
		summary: "print the arguments and stdin",
	},
	"b-longer-name": {summary: "a second command"},
}

const testUsage = `keyrate is the command-line tool of the keyrate per-key rate limiter.

Usage:

	keyrate <command> [arguments]

The commands are:

	b-longer-name  a second command
	echo           print the arguments and stdin

Run 'keyrate <command> -h' for a command's flags.
`

func TestDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no arguments", nil, 2, "", testUsage},
		{"-h", []string{"-h"}, 0, testUsage, ""},
		{"-help", []string{"-help"}, 0, testUsage, ""},
		{"--help", []string{"--help"}, 0, testUsage, ""},
		{"help", []string{"help"}, 0, testUsage, ""},
		{"unknown command", []string{"frobnicate", "-x"}, 2, "",
			"keyrate: unknown command \"frobnicate\"; run 'keyrate -h' for the list\n"},
		{"unknown flag", []string{"-store", "mutex"}, 2, "",
			"keyrate: unknown command \"-store\"; run 'keyrate -h' for the list\n"},
		{"command", []string{"echo", "-a", "b"}, 3, "args [\"-a\" \"b\"] stdin \"in\"\n", "to stderr\n"},
		{"command without arguments", []string{"echo"}, 3, "args [] stdin \"in\"\n", "to stderr\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(testCommands, tt.args, strings.NewReader("in"), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("status %d, want %d", code, tt.wantCode)
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), tt.wantStdout)
			}
			if stderr.String() != tt.wantStderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestRun checks the real table: every registered command is listed with
// its summary, and replay runs through run.
func TestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("keyrate -h: status %d", code)
	}
	for name, cmd := range commands {
		if cmd.summary == "" || strings.HasSuffix(cmd.summary, ".") {
			t.Errorf("command %s: summary %q, want a phrase with no final period", name, cmd.summary)
		}
		if !strings.Contains(stdout.String(), "\t"+name+" ") || !strings.Contains(stdout.String(), cmd.summary+"\n") {
			t.Errorf("keyrate -h does not list %s:\n%s", name, stdout.String())
		}
	}

	stdout.Reset()
	if code := run([]string{"replay", "-store", "striped"}, strings.NewReader(example), &stdout, &stderr); code != 0 {
		t.Fatalf("keyrate replay: status %d, stderr %q", code, stderr.String())
	}
	if want := strings.Repeat("allow\n", 6) + "deny\n"; stdout.String() != want {
		t.Errorf("keyrate replay: stdout %q, want %q", stdout.String(), want)
	}
}
