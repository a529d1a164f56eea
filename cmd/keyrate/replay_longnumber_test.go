package main

import (
	"strings"
	"testing"
)

// TestReplayLongNumberMessage: a number too large (or too negative) for
// int64 is named in its error cut to 40 bytes, as replay quotes every
// other field: echoed whole, half a mebibyte of digits made a 512 KiB
// error "line". The message names the value shortened, and the bound, in
// a line of reasonable length.
func TestReplayLongNumberMessage(t *testing.T) {
	digits := strings.Repeat("9", 500_000)
	for _, tc := range []struct{ name, input, prefix string }{
		{"capacity", digits + "\n10\n0\n", "line 1: capacity 9999"},
		{"capacity negative", "-" + digits + "\n10\n0\n", "line 1: capacity -9999"},
		{"timestamp", "3\n10\n1\nrequest a " + digits + "\n", "line 4: timestamp 9999"},
		{"timestamp negative", "3\n10\n1\nrequest a -" + digits + "\n", "line 4: timestamp -9999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := replayCmd(t, tc.input)
			if code != 2 || stdout != "" {
				t.Errorf("status %d, stdout %q: want 2 and nothing", code, stdout)
			}
			if !strings.HasPrefix(stderr, tc.prefix) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr %.80q..., want one line starting %q", stderr, tc.prefix)
			}
			if len(stderr) > 200 {
				t.Errorf("the error is %d bytes: %.120q...", len(stderr), stderr)
			}
		})
	}
}
