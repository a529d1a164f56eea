package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyrate/keyrate"
)

// policiesHelp describes the file -policies reads, for serve's help.
const policiesHelp = `The file -policies names holds one window of a policy (tier) per line:

	NAME RATE PER [BURST]   RATE tokens every PER, up to BURST (default RATE)
	NAME unlimited          a policy that admits every request

The lines of one NAME are its windows, in order (at most 8, no two the
same), enforced together: a request is allowed only if every window holds
its cost. NAME
is 1 to 64 letters, digits, '-', '_' or '.'; "default" replaces the
policy of -rate, -per and -burst. PER is a Go duration such as 1s, 1m or
1h. Fields are separated by spaces or tabs; blank lines and lines that
start with # are ignored. For example:

	# name  rate  per  burst
	free    10    1m
	pro     10    1s   20
	pro     1000  1h
	ops     unlimited

A bad file is one line on stderr naming the file and line at fault, and
exit status 2.
`

// maxPolicyLine is the longest line a policies file may hold, in bytes.
const maxPolicyLine = 4096

// maxPolicyName is the longest policy name a policies file may use.
const maxPolicyName = 64

// policyFile is a parsed policies file: its policies, in the order their
// names first appear, and the line each starts on.
type policyFile struct {
	name     string // the file's name, for errors
	policies []keyrate.Policy
	lines    []int // lines[i]: the line policies[i] starts on
}

// find returns the index of the policy named name, or -1.
func (f *policyFile) find(name string) int {
	for i, p := range f.policies {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// names returns the policies' names other than the default's, in order,
// comma-separated; "" for a nil f.
func (f *policyFile) names() string {
	if f == nil {
		return ""
	}
	var names []string
	for _, p := range f.policies {
		if p.Name != keyrate.DefaultPolicy {
			names = append(names, p.Name)
		}
	}
	return strings.Join(names, ", ")
}

// readPolicies reads and parses the policies file at path.
func readPolicies(path string) (*policyFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return parsePolicies(path, fh)
}

// parsePolicies parses a policies file named name (for errors) from r. Its
// errors are one line: "NAME:LINE: what is wrong", quoting the bad value.
func parsePolicies(name string, r io.Reader) (*policyFile, error) {
	f := &policyFile{name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxPolicyLine)
	line := 0
	windowLines := map[int][]int{} // the line of each window, by policy
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		pname := fields[0]
		if err := checkPolicyName(pname); err != nil {
			if line == 1 && strings.HasPrefix(pname, string(byteOrderMark)) {
				return nil, fail("%v: %s", err, bomHint("file"))
			}
			return nil, fail("%v", err)
		}
		i := f.find(pname)
		if i < 0 {
			f.policies = append(f.policies, keyrate.Policy{Name: pname})
			f.lines = append(f.lines, line)
			i = len(f.policies) - 1
		}
		p := &f.policies[i]
		if len(fields) == 2 && fields[1] == "unlimited" {
			if p.Unlimited || len(p.Limits) > 0 {
				return nil, fail("%q is already defined on line %d; an unlimited policy is one line", pname, f.lines[i])
			}
			p.Unlimited = true
			continue
		}
		if p.Unlimited {
			return nil, fail("%q is unlimited (line %d) and cannot also have windows", pname, f.lines[i])
		}
		if len(fields) < 3 || len(fields) > 4 {
			return nil, fail("%d %s, want NAME RATE PER [BURST] or NAME unlimited", len(fields), plural(len(fields), "field"))
		}
		l, err := parseWindow(fields[1:])
		if err != nil {
			return nil, fail("%v", err)
		}
		if j := slices.Index(p.Limits, l); j >= 0 {
			return nil, fail("%q has this window already, on line %d", pname, windowLines[i][j])
		}
		if len(p.Limits) == keyrate.MaxLimits {
			return nil, fail("%q has more than %d windows", pname, keyrate.MaxLimits)
		}
		p.Limits = append(p.Limits, l)
		windowLines[i] = append(windowLines[i], line)
	}
	if err := sc.Err(); err != nil {
		line++ // the line the scanner stopped in
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fail("longer than %d bytes", maxPolicyLine)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(f.policies) == 0 {
		return nil, fmt.Errorf("%s: no policies (want lines of NAME RATE PER [BURST] or NAME unlimited)", name)
	}
	for i, p := range f.policies {
		if err := p.Validate(); err != nil { // every window was checked; a backstop
			line = f.lines[i]
			return nil, fail("%v", err)
		}
	}
	return f, nil
}

// checkPolicyName returns an error if s is not a policy name a file may
// use: 1 to maxPolicyName letters, digits, '-', '_' or '.', so that it
// needs no quoting in a header field or a shell.
func checkPolicyName(s string) error {
	if len(s) > maxPolicyName {
		return fmt.Errorf("name %.20q... is %d bytes, above the most of %d", s, len(s), maxPolicyName)
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_', b == '.':
		default:
			return fmt.Errorf("name %q: byte %q at %d is not a letter, digit, '-', '_' or '.'", s, s[i:i+1], i)
		}
	}
	return nil
}

// parseWindow parses RATE PER [BURST] into a valid Limit.
func parseWindow(fields []string) (keyrate.Limit, error) {
	var l keyrate.Limit
	var err error
	if l.Rate, err = parseCount("rate", fields[0]); err != nil {
		return l, err
	}
	if l.Per, err = time.ParseDuration(fields[1]); err != nil {
		switch {
		case durationSyntax.MatchString(fields[1]):
			// Well formed, so too long: ParseDuration says only "invalid".
			return l, fmt.Errorf("per %q is out of range: at most %v", fields[1], time.Duration(math.MaxInt64))
		case strings.Contains(err.Error(), "unknown unit"):
			return l, fmt.Errorf("per %q: %s", fields[1], strings.TrimPrefix(err.Error(), "time: "))
		}
		return l, fmt.Errorf("per %q is not a duration such as 1s, 1m or 1h", fields[1])
	}
	l.Burst = l.Rate
	if len(fields) == 3 {
		if l.Burst, err = parseCount("burst", fields[2]); err != nil {
			return l, err
		}
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("%v: %w", l, err)
	}
	return l, nil
}

// durationSyntax matches what time.ParseDuration accepts when in range.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// plural returns word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// parseCount parses s, the field what, as an int.
func parseCount(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%s %q is out of range", what, s)
	case err != nil:
		return 0, fmt.Errorf("%s %q is not a whole number", what, s)
	}
	return n, nil
}
