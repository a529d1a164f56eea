package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

func TestParsePolicies(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []keyrate.Policy
	}{
		{"one window", "free 10 1m\n", []keyrate.Policy{{Name: "free", Limits: []keyrate.Limit{keyrate.PerMinute(10)}}}},
		{"burst, tabs, comments, blank lines, CRLF", "# tiers\r\n\r\n  # indented comment\npro\t10\t1s  20\r\n", []keyrate.Policy{
			{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10).WithBurst(20)}}}},
		{"windows in order, names in order of appearance", "pro 10 1s\nfree 1 1h\npro 1000 1h\nops unlimited", []keyrate.Policy{
			{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(10), keyrate.PerHour(1000)}},
			{Name: "free", Limits: []keyrate.Limit{keyrate.PerHour(1)}},
			keyrate.Unlimited("ops")}},
		{"the default and odd names", "default 5 1s\nA-b_c.9 1 500ms", []keyrate.Policy{
			{Name: "default", Limits: []keyrate.Limit{keyrate.PerSecond(5)}},
			{Name: "A-b_c.9", Limits: []keyrate.Limit{{Rate: 1, Per: 500 * time.Millisecond, Burst: 1}}}}},
		{"eight windows", "p 1 1s\np 2 1s\np 3 1s\np 4 1s\np 5 1s\np 6 1s\np 7 1s\np 8 1s\n", []keyrate.Policy{{Name: "p", Limits: []keyrate.Limit{
			keyrate.PerSecond(1), keyrate.PerSecond(2), keyrate.PerSecond(3), keyrate.PerSecond(4),
			keyrate.PerSecond(5), keyrate.PerSecond(6), keyrate.PerSecond(7), keyrate.PerSecond(8)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parsePolicies("tiers.txt", strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.policies, tt.want) {
				t.Errorf("policies\n%v\nwant\n%v", f.policies, tt.want)
			}
		})
	}
}

// TestParsePoliciesErrors: every bad file is one line naming the file,
// the line at fault and the bad value.
func TestParsePoliciesErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string // the whole error
	}{
		{"", "tiers.txt: no policies (want lines of NAME RATE PER [BURST] or NAME unlimited)"},
		{"# only a comment\n\n", "tiers.txt: no policies (want lines of NAME RATE PER [BURST] or NAME unlimited)"},
		{"free 10\n", "tiers.txt:1: 2 fields, want NAME RATE PER [BURST] or NAME unlimited"},
		{"free\n", "tiers.txt:1: 1 field, want NAME RATE PER [BURST] or NAME unlimited"},
		{"\xef\xbb\xbffree 10 1m\n", `tiers.txt:1: name "\ufefffree": byte "\xef" at 0 is not a letter, digit, '-', '_' or '.': the file starts with a UTF-8 byte-order mark; save it without one`},
		{"free 10 1m 10 # burst\n", "tiers.txt:1: 6 fields, want NAME RATE PER [BURST] or NAME unlimited"},
		{"\nfree ten 1m\n", `tiers.txt:2: rate "ten" is not a whole number`},
		{"free 99999999999999999999 1m\n", `tiers.txt:1: rate "99999999999999999999" is out of range`},
		{"free 10 soon\n", `tiers.txt:1: per "soon" is not a duration such as 1s, 1m or 1h`},
		{"free 10 60\n", `tiers.txt:1: per "60" is not a duration such as 1s, 1m or 1h`},
		{"free 10 99999999999h\n", `tiers.txt:1: per "99999999999h" is out of range: at most 2562047h47m16.854775807s`},
		{"free 10 1.5h9999999999999m\n", `tiers.txt:1: per "1.5h9999999999999m" is out of range: at most 2562047h47m16.854775807s`},
		{"free 10 1d\n", `tiers.txt:1: per "1d": unknown unit "d" in duration "1d"`},
		{"free 10 1m 1.5\n", `tiers.txt:1: burst "1.5" is not a whole number`},
		{"ok 1 1s\nfree 0 1m\n", "tiers.txt:2: 0 per 1m0s, burst 0: keyrate: invalid limit: Rate 0 is below 1"},
		{"free 10 -1s\n", "tiers.txt:1: 10 per -1s, burst 10: keyrate: invalid limit: Per -1s is below 1ns"},
		{"free 10 1m -3\n", "tiers.txt:1: 10 per 1m0s, burst -3: keyrate: invalid limit: Burst -3 is below 1"},
		{`fr"ee 10 1m` + "\n", `tiers.txt:1: name "fr\"ee": byte "\"" at 2 is not a letter, digit, '-', '_' or '.'`},
		{"frée 10 1m\n", `tiers.txt:1: name "frée": byte "\xc3" at 2 is not a letter, digit, '-', '_' or '.'`},
		{strings.Repeat("n", 65) + " 1 1s\n", `tiers.txt:1: name "nnnnnnnnnnnnnnnnnnnn"... is 65 bytes, above the most of 64`},
		{"ops unlimited\nops 1 1s\n", `tiers.txt:2: "ops" is unlimited (line 1) and cannot also have windows`},
		{"ops 1 1s\n\nops unlimited\n", `tiers.txt:3: "ops" is already defined on line 1; an unlimited policy is one line`},
		{"ops unlimited\nops unlimited\n", `tiers.txt:2: "ops" is already defined on line 1; an unlimited policy is one line`},
		{"ops unlimited 5\n", `tiers.txt:1: rate "unlimited" is not a whole number`},
		{"p 1 1s\np 2 1s\np 3 1s\np 4 1s\np 5 1s\np 6 1s\np 7 1s\np 8 1s\np 9 1s\n", `tiers.txt:9: "p" has more than 8 windows`},
		{"pro 10 1s 20\nfree 1 1s\npro 1000 1h\npro 10 1s 20\n", `tiers.txt:4: "pro" has this window already, on line 1`},
		{"pro 10 1s\npro 1000 1h\n# the burst defaults to the rate\npro 10 1s 10\n", `tiers.txt:4: "pro" has this window already, on line 1`},
		{"p 1 1s\n" + strings.Repeat("x", 5000) + "\n", "tiers.txt:2: longer than 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			f, err := parsePolicies("tiers.txt", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("parsed %v, want error %q", f.policies, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

// FuzzParsePolicies: no input panics; an error is one line naming the
// file; what parses is a set of valid policies with distinct names.
func FuzzParsePolicies(f *testing.F) {
	for _, seed := range []string{
		"free 10 1m\npro 10 1s 20\npro 1000 1h\nops unlimited\n",
		"# c\n\ndefault 1 1ns\n",
		"p 1 1s\np 1 1s\np 1 1s\np 1 1s\np 1 1s\np 1 1s\np 1 1s\np 1 1s\np 1 1s\n",
		"x 9223372036854775807 2562047h 9223372036854775807\n",
		"a unlimited\na 1 1s\n",
		"\xff 1 1s",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		pf, err := parsePolicies("f", strings.NewReader(in))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "f:") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error %q: want one line starting %q", msg, "f:")
			}
			return
		}
		seen := map[string]bool{}
		for _, p := range pf.policies {
			if err := p.Validate(); err != nil {
				t.Fatalf("parsed an invalid policy %v: %v", p, err)
			}
			if seen[p.Name] {
				t.Fatalf("two policies named %q", p.Name)
			}
			seen[p.Name] = true
		}
	})
}

func TestReadPoliciesMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.txt")
	if _, err := readPolicies(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readPolicies(%s): %v, want a not-exist error", path, err)
	}
}
