package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/racetest"
)

// example is the input from the replay issue.
const example = `3
10
7
request alice 0
request alice 0
request alice 0
request alice 4
request alice 7
request alice 10
request alice 13
`

// storeNames are the values of -store.
var storeNames = []string{"mutex", "striped", "atomic"}

// replayCmd runs "keyrate replay args..." on input and returns what it
// printed and its exit status.
func replayCmd(t testing.TB, input string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runReplay(args, strings.NewReader(input), &out, &errOut)
	return out.String(), errOut.String(), code
}

// replayAll runs input through every store and returns the common output,
// failing the test if the stores disagree on any of stdout, stderr or the
// status.
func replayAll(t testing.TB, input string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code = replayCmd(t, input)
	for _, name := range storeNames {
		o, e, c := replayCmd(t, input, "-store", name)
		if o != stdout || e != stderr || c != code {
			t.Fatalf("-store %s: got (%q, %q, %d), default store got (%q, %q, %d)\ninput:\n%s",
				name, o, e, c, stdout, stderr, code, input)
		}
	}
	return stdout, stderr, code
}

// request is one request command of a replay input.
type request struct {
	client string
	ts     int64
}

// stream returns the replay input for the given header and requests.
func stream(capacity, window int64, reqs []request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n%d\n%d\n", capacity, window, len(reqs))
	for _, r := range reqs {
		fmt.Fprintf(&b, "request %s %d\n", r.client, r.ts)
	}
	return b.String()
}

// reference decides reqs with an exact token bucket counted in rationals:
// each client starts with capacity tokens, gains capacity/window tokens per
// time unit up to capacity, and is allowed when it holds at least one.
func reference(capacity, window int64, reqs []request) string {
	type bucket struct {
		tokens *big.Rat
		at     int64
	}
	full := big.NewRat(capacity, 1)
	one := big.NewRat(1, 1)
	buckets := map[string]*bucket{}
	var out strings.Builder
	for _, r := range reqs {
		b, ok := buckets[r.client]
		if !ok {
			b = &bucket{tokens: new(big.Rat).Set(full), at: r.ts}
			buckets[r.client] = b
		}
		gained := big.NewRat((r.ts - b.at), 1)
		gained.Mul(gained, big.NewRat(capacity, window))
		b.tokens.Add(b.tokens, gained)
		if b.tokens.Cmp(full) > 0 {
			b.tokens.Set(full)
		}
		b.at = r.ts
		if b.tokens.Cmp(one) >= 0 {
			b.tokens.Sub(b.tokens, one)
			out.WriteString("allow\n")
		} else {
			out.WriteString("deny\n")
		}
	}
	return out.String()
}

// repeat returns n copies of line, each ending in a newline.
func repeat(line string, n int) string { return strings.Repeat(line+"\n", n) }

func TestReplay(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"issue example", example, repeat("allow", 6) + "deny\n"},
		{"no commands", "3\n10\n0\n", ""},
		{"no final newline", "1\n1\n1\nrequest a 0", "allow\n"},
		{"trailing blank lines", "1\n1\n1\nrequest a 0\n\n  \n\t\n", "allow\n"},
		{"CRLF line endings", "1\n1\n2\r\nrequest a 0\r\nrequest a 0\r\n", "allow\ndeny\n"},
		{"spaces and tabs", " 2 \n\t5\n3\n request\t a  0 \nrequest a 0\nrequest\ta\t0\n", "allow\nallow\ndeny\n"},
		{"clients are separate", "1\n10\n4\nrequest a 0\nrequest b 0\nrequest a 9\nrequest b 10\n", "allow\nallow\ndeny\nallow\n"},
		{"client is any token", "1\n10\n3\nrequest request 0\nrequest 42 0\nrequest ü\x00\xff 0\n", repeat("allow", 3)},
		{"plus sign and leading zeros", "1\n10\n2\nrequest a +0\nrequest a 0010\n", "allow\nallow\n"},
		// 7 per 100: a token every 100/7 units. At 14 a reference that
		// rounds the interval down (to 14) would allow; exact is 14.28...
		{"capacity 7 window 100", "7\n100\n9\n" + repeat("request a 0", 7) + "request a 14\nrequest a 15\n", repeat("allow", 7) + "deny\nallow\n"},
		{"timestamp 10^12", "1000\n100000\n3\nrequest a 1000000000000\nrequest b 1000000000000\nrequest a 1000000000000\n", repeat("allow", 3)},
		{"timestamp 10^12, unit 999ns", "999\n100000\n" + fmt.Sprint(1001) + "\n" + repeat("request a 1000000000000", 999) + "request a 1000000000100\nrequest a 1000000000101\n", repeat("allow", 999) + "deny\nallow\n"},
		{"largest timestamp, capacity 999 window 100000", "999\n100000\n2\nrequest a 0\nrequest a 4616302320748136\n", "allow\nallow\n"},
		{"largest timestamp, capacity 1 window 1", "1\n1\n3\nrequest a 4611686018427387903\nrequest a 4611686018427387904\nrequest a 4611686018427387904\n", "allow\nallow\ndeny\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := replayAll(t, tt.input)
			if code != 0 || stderr != "" {
				t.Fatalf("status %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
		})
	}
}

// TestReplayErrors checks every kind of bad input: one line on stderr with
// the line number, nothing on stdout, status 2, whatever the store.
func TestReplayErrors(t *testing.T) {
	const head = "3\n10\n2\n"
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"empty input", "", "line 1: missing capacity"},
		{"blank capacity", "\n3\n10\n0\n", "line 1: missing capacity"},
		{"capacity not an integer", "x\n10\n0\n", `line 1: capacity "x" is not an integer`},
		{"capacity a float", "3.0\n10\n0\n", `line 1: capacity "3.0" is not an integer`},
		{"byte-order mark", "\xef\xbb\xbf3\n10\n0\n", `line 1: capacity "\ufeff3" is not an integer: the input starts with a UTF-8 byte-order mark; save it without one`},
		{"capacity zero", "0\n10\n0\n", "line 1: capacity 0 is below 1"},
		{"capacity negative", "-5\n10\n0\n", "line 1: capacity -5 is below 1"},
		{"capacity below int64", "-99999999999999999999\n10\n0\n", "line 1: capacity -99999999999999999999 is below 1"},
		{"capacity above int64", "99999999999999999999\n10\n0\n", "line 1: capacity 99999999999999999999 is above 9223372036854775807"},
		{"capacity extra field", "3 4\n10\n0\n", `line 1: extra field "4" after the capacity`},
		{"missing window", "3", "line 2: missing window"},
		{"window zero", "3\n0\n0\n", "line 2: window 0 is below 1"},
		{"window not an integer", "3\n1e3\n0\n", `line 2: window "1e3" is not an integer`},
		{"fill time too long for the library", "4294967296\n2147483647\n0\n",
			"line 2: capacity 4294967296 with window 2147483647 cannot be represented: keyrate: invalid limit: Burst 4294967296 takes too long to fill at 4294967296 per 2562047h47m12.559808512s: the most is 2147483649"},
		{"window overflows time.Duration", "4294967296\n2147483649\n0\n",
			"line 2: capacity 4294967296 with window 2147483649 cannot be represented: a window of 2147483649 units of 4294967296ns overflows time.Duration"},
		{"missing count", "3\n10\n", "line 3: missing command count"},
		{"count negative", "3\n10\n-1\n", "line 3: command count -1 is negative"},
		{"count not an integer", "3\n10\nseven\n", `line 3: command count "seven" is not an integer`},
		{"no commands", "3\n10\n1\n", "line 4: input ends after 0 of 1 command"},
		{"too few commands", head + "request a 0", "line 5: input ends after 1 of 2 commands"},
		{"too few commands, trailing blank lines", head + "request a 0\n\n\n", "line 5: input ends after 1 of 2 commands"},
		{"blank line between commands", head + "request a 0\n \nrequest a 1\n", "line 5: blank line where command 2 of 2 should be"},
		{"blank line before an over-long line", head + "request a 0\n\n" + strings.Repeat("x", maxLine+1) + "\n", "line 5: blank line where command 2 of 2 should be"},
		{"too many commands", head + "request a 0\nrequest a 1\nrequest a 2\n", "line 6: more than 2 commands"},
		{"too many commands after blank lines", "3\n10\n1\nrequest a 0\n\n\nx\n", "line 7: more than 1 command"},
		{"commands with count 0", "3\n10\n0\nrequest a 0\n", "line 4: more than 0 commands"},
		{"unknown command", head + "allow a 0\n", `line 4: unknown command "allow", want request`},
		{"command is case-sensitive", head + "Request a 0\n", `line 4: unknown command "Request", want request`},
		{"long unknown command", head + strings.Repeat("z", 50) + " a 0\n", `line 4: unknown command "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"..., want request`},
		{"missing client and timestamp", head + "request\n", "line 4: missing client and timestamp"},
		{"missing timestamp", head + "request a 0\nrequest a\n", "line 5: missing timestamp"},
		{"extra field", head + "request a 0 1\n", `line 4: extra field "1" after the timestamp`},
		{"timestamp not an integer", head + "request a 1.5\n", `line 4: timestamp "1.5" is not an integer`},
		{"timestamp negative", head + "request a -1\n", "line 4: timestamp -1 is negative"},
		{"timestamp decreasing", "3\n10\n7\nrequest alice 0\nrequest alice 5\nrequest bob 5\nrequest bob 4\n", "line 7: timestamp 4 is before 5"},
		{"timestamp past the clock range", head + "request a 1537228672809129302\n",
			"line 4: timestamp 1537228672809129302 is above 1537228672809129301, the largest with capacity 3 and window 10"},
		{"timestamp above int64", head + "request a 99999999999999999999\n",
			"line 4: timestamp 99999999999999999999 is above 1537228672809129301, the largest with capacity 3 and window 10"},
		{"timestamp past the clock range, unit 999ns", "999\n100000\n1\nrequest a 4616302320748137\n",
			"line 4: timestamp 4616302320748137 is above 4616302320748136, the largest with capacity 999 and window 100000"},
		{"line too long", head + "request " + strings.Repeat("a", maxLine-len("request ")-1) + " 0\n", "line 4: line is longer than 1048576 bytes"},
		{"line far too long", head + "request a 0\nrequest " + strings.Repeat("a", 3*maxLine) + " 0\n", "line 5: line is longer than 1048576 bytes"},
		{"header line too long", strings.Repeat(" ", maxLine+3), "line 1: line is longer than 1048576 bytes"},
		{"first error wins", "3\n10\n2\nrequest a 5\nrequest a 4\nbogus\n", "line 5: timestamp 4 is before 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := replayAll(t, tt.input)
			if code != 2 {
				t.Errorf("status %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if stderr != tt.want+"\n" {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.want+"\n")
			}
		})
	}
}

// TestReplayLongestLine checks that a line of exactly maxLine bytes, not
// counting its line ending, is accepted with either line ending.
func TestReplayLongestLine(t *testing.T) {
	line := "request " + strings.Repeat("c", maxLine-len("request  0")) + " 0"
	for _, input := range []string{
		"1\n1\n2\n" + line + "\n" + line + "\n",
		"1\n1\n2\r\n" + line + "\r\n" + line + "\r\n",
		"1\n1\n2\n" + line + "\n" + line, // no final newline
	} {
		stdout, stderr, code := replayCmd(t, input)
		if code != 0 || stdout != "allow\ndeny\n" || stderr != "" {
			t.Errorf("input ending %q: got (%q, %q, %d), want (%q, \"\", 0)", input[len(input)-4:], stdout, stderr, code, "allow\ndeny\n")
		}
	}
}

func TestReplayFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a prefix
		wantStderr string
	}{
		{"default store", nil, 0, "allow\n", ""},
		{"-store=mutex", []string{"-store=mutex"}, 0, "allow\n", ""},
		{"bad store", []string{"-store", "foo"}, 2, "",
			`keyrate replay: invalid value "foo" for flag -store: want mutex, striped or atomic` + "\n"},
		{"store without value", []string{"-store"}, 2, "", "keyrate replay: flag needs an argument: -store\n"},
		{"unknown flag", []string{"-x"}, 2, "", "keyrate replay: flag provided but not defined: -x\n"},
		{"argument", []string{"input.txt"}, 2, "",
			`keyrate replay: unexpected argument "input.txt" (the input is read from stdin)` + "\n"},
		{"help", []string{"-h"}, 0, "usage: keyrate replay [-store mutex|striped|atomic] [-algorithm name] < input\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := replayCmd(t, "1\n1\n1\nrequest a 0\n", tt.args...)
			if code != tt.wantCode {
				t.Errorf("status %d, want %d", code, tt.wantCode)
			}
			if !strings.HasPrefix(stdout, tt.wantStdout) || (tt.wantStdout == "") != (stdout == "") {
				t.Errorf("stdout %q, want it to start with %q", stdout, tt.wantStdout)
			}
			if stderr != tt.wantStderr {
				t.Errorf("stderr %q, want %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestReplayHelpListsFlags(t *testing.T) {
	stdout, _, _ := replayCmd(t, "", "-h")
	const want = "  -store name\n    \tthe name of the store that decides: mutex, striped or atomic (default atomic)\n"
	if !strings.HasSuffix(stdout, want) {
		t.Errorf("help ends:\n%s\nwant it to end:\n%s", stdout[max(0, len(stdout)-len(want)-40):], want)
	}
}

// failingReader returns some input and then an error.
type failingReader struct{ data string }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, errors.New("disk on fire")
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("pipe closed") }

func TestReplayIOErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runReplay(nil, &failingReader{"1\n1\n2\nrequest a 0\n"}, &out, &errOut); code != 1 {
		t.Errorf("read error: status %d, want 1", code)
	}
	if out.String() != "" || errOut.String() != "disk on fire\n" {
		t.Errorf("read error: stdout %q, stderr %q; want nothing and %q", out.String(), errOut.String(), "disk on fire\n")
	}

	errOut.Reset()
	if code := runReplay(nil, strings.NewReader(example), failingWriter{}, &errOut); code != 1 {
		t.Errorf("write error: status %d, want 1", code)
	}
	if want := "keyrate replay: pipe closed\n"; errOut.String() != want {
		t.Errorf("write error: stderr %q, want %q", errOut.String(), want)
	}
}

// randomRequests returns n requests from 3 clients whose timestamps start
// at start and, at one request in five, advance by up to about two token
// intervals: slowly enough that the clients' buckets drain.
func randomRequests(rng *rand.Rand, capacity, window, start int64, n int) []request {
	reqs := make([]request, n)
	ts := start
	for i := range reqs {
		if rng.IntN(5) == 0 {
			ts += rng.Int64N(2*window/capacity + 2)
		}
		reqs[i] = request{client: fmt.Sprint("c", rng.IntN(3)), ts: ts}
	}
	return reqs
}

// TestReplayReference checks replay against the rational reference on
// random streams, with capacities that do not divide the window.
func TestReplayReference(t *testing.T) {
	tests := []struct {
		capacity, window, start int64
	}{
		{3, 10, 0},
		{7, 100, 0},
		{10, 3, 0},
		{6, 9, 0},
		{1, 1, 0},
		{1000, 99999, 0},
		{999, 100000, 1_000_000_000_000},
		{13, 100000, 1_000_000_000_000},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		t.Run(fmt.Sprintf("capacity=%d/window=%d/start=%d", tt.capacity, tt.window, tt.start), func(t *testing.T) {
			reqs := randomRequests(rng, tt.capacity, tt.window, tt.start, 3000+10*int(tt.capacity))
			want := reference(tt.capacity, tt.window, reqs)
			if !strings.Contains(want, "allow") || !strings.Contains(want, "deny") {
				t.Fatalf("the reference allows or denies everything; the test proves little")
			}
			stdout, stderr, code := replayAll(t, stream(tt.capacity, tt.window, reqs))
			if code != 0 {
				t.Fatalf("status %d, stderr %q", code, stderr)
			}
			if stdout != want {
				got, exp := strings.Split(stdout, "\n"), strings.Split(want, "\n")
				for i := range min(len(got), len(exp)) {
					if got[i] != exp[i] {
						t.Fatalf("request %d (%+v): got %s, want %s", i+1, reqs[i], got[i], exp[i])
					}
				}
				t.Fatalf("got %d lines, want %d", len(got), len(exp))
			}
		})
	}
}

// FuzzReplay checks that replay never panics, exits 0 or 2, reports bad
// input as one "line N: ..." line with nothing on stdout, decides good
// input with one allow or deny per command, and that the stores agree. Its
// seeds are in testdata/fuzz/FuzzReplay.
func FuzzReplay(f *testing.F) {
	f.Fuzz(func(t *testing.T, input []byte) {
		stdout, stderr, code := replayAll(t, string(input))
		switch code {
		case 2:
			if stdout != "" {
				t.Errorf("status 2 with stdout %q", stdout)
			}
			if !strings.HasPrefix(stderr, "line ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("status 2 with stderr %q, want one line starting with \"line \"", stderr)
			}
		case 0:
			if stderr != "" {
				t.Errorf("status 0 with stderr %q", stderr)
			}
			// The input was accepted, so its third line is n.
			header := strings.SplitN(string(input), "\n", 4)
			n, err := strconv.ParseInt(strings.Trim(header[2], " \t\r\v\f"), 10, 64)
			if err != nil {
				t.Fatalf("accepted input with command count %q: %v", header[2], err)
			}
			if got := strings.Count(stdout, "\n"); int64(got) != n {
				t.Fatalf("%d output lines for %d commands", got, n)
			}
			for line := range strings.Lines(stdout) {
				if line != "allow\n" && line != "deny\n" {
					t.Fatalf("output line %q", line)
				}
			}
		default:
			t.Errorf("status %d, want 0 or 2; stderr %q", code, stderr)
		}
	})
}

// FuzzReplayReference compares replay with the rational reference on small
// random streams.
func FuzzReplayReference(f *testing.F) {
	f.Add(uint16(3), uint32(10), []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 3, 0, 3})
	f.Add(uint16(7), uint32(100), []byte{1, 0, 1, 0, 1, 0, 1, 0, 1, 14, 1, 1})
	f.Add(uint16(999), uint32(1000), []byte{0, 255, 3, 200, 6, 1})
	f.Fuzz(func(t *testing.T, c uint16, w uint32, ops []byte) {
		capacity, window := int64(c%1000)+1, int64(w%100_000)+1
		var reqs []request
		var ts int64
		for i := 0; i+1 < len(ops); i += 2 {
			// Low steps move in raw units; high ones in sixteenths of a
			// window, so that long idles and refills are exercised too.
			if step := int64(ops[i+1]); step < 128 {
				ts += step
			} else {
				ts += (step - 128) * (window/16 + 1)
			}
			reqs = append(reqs, request{client: fmt.Sprint("c", ops[i]%4), ts: ts})
		}
		want := reference(capacity, window, reqs)
		stdout, stderr, code := replayAll(t, stream(capacity, window, reqs))
		if code != 0 || stdout != want {
			t.Fatalf("capacity %d window %d %v: got (%q, %q, %d), want %q", capacity, window, reqs, stdout, stderr, code, want)
		}
	})
}

// BenchmarkReplay decides a stream of a million requests from ten thousand
// clients, to check that replay keeps up with large inputs (under the race
// detector, ten thousand requests from a hundred clients).
func BenchmarkReplay(b *testing.B) {
	racetest.Bench()
	requests, clients := 1_000_000, 10_000
	if racetest.Enabled {
		requests, clients = 10_000, 100
	}
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]request, requests)
	for i := range reqs {
		reqs[i] = request{client: fmt.Sprint("client", rng.IntN(clients)), ts: int64(i / 2)}
	}
	input := stream(7, 100, reqs)
	for _, name := range storeNames {
		b.Run("store="+name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				var out, errOut bytes.Buffer
				if code := runReplay([]string{"-store", name}, strings.NewReader(input), &out, &errOut); code != 0 {
					b.Fatalf("status %d: %s", code, errOut.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/request")
		})
	}
}

// windowReference decides reqs with conformance.WindowModel (or
// LogModel for the sliding log), one per client, each request of cost 1.
func windowReference(alg keyrate.Algorithm, capacity, window int64, reqs []request) string {
	type model interface{ Take(t, c int64) bool }
	models := map[string]model{}
	limit := keyrate.Limit{Rate: int(capacity), Per: time.Duration(window)}.Using(alg)
	var out strings.Builder
	for _, r := range reqs {
		m := models[r.client]
		if m == nil {
			if alg == keyrate.SlidingLog {
				m = conformance.NewLogModel(limit)
			} else {
				m = conformance.NewWindowModel(limit)
			}
			models[r.client] = m
		}
		if m.Take(r.ts, 1) {
			out.WriteString("allow\n")
		} else {
			out.WriteString("deny\n")
		}
	}
	return out.String()
}

// TestReplayAlgorithms checks -algorithm by hand-worked streams, and
// against the window model on random ones, with every store.
func TestReplayAlgorithms(t *testing.T) {
	const steps = "3\n10\n8\nrequest a 0\nrequest a 1\nrequest a 9\nrequest a 9\nrequest a 10\nrequest a 13\nrequest a 14\nrequest b 14\n"
	for _, c := range []struct {
		alg, want string
	}{
		{"fixed-window", "allow\nallow\nallow\ndeny\nallow\nallow\nallow\nallow\n"},
		// 3 in window 0; at 13, 3·7 + 1·10 = 31 > 30; at 14, 3·6 + 10 = 28
		{"sliding-window", "allow\nallow\nallow\ndeny\ndeny\ndeny\nallow\nallow\n"},
		// 0, 1, 9 in (−1, 9]; at 10, 0 has left; at 13 (3, 13] holds 9, 10
		{"sliding-log", "allow\nallow\nallow\ndeny\nallow\nallow\ndeny\nallow\n"},
		{"token-bucket", reference(3, 10, []request{{"a", 0}, {"a", 1}, {"a", 9}, {"a", 9}, {"a", 10}, {"a", 13}, {"a", 14}, {"b", 14}})},
	} {
		for _, store := range storeNames {
			stdout, stderr, code := replayCmd(t, steps, "-algorithm", c.alg, "-store", store)
			if c.alg == "sliding-log" && store == "atomic" {
				if code != 2 || !strings.Contains(stderr, "-store atomic cannot carry -algorithm sliding-log") {
					t.Errorf("-algorithm sliding-log -store atomic: (%q, %q, %d), want status 2 and the flags' refusal", stdout, stderr, code)
				}
				continue
			}
			if code != 0 || stdout != c.want {
				t.Errorf("-algorithm %s -store %s: (%q, %q, %d), want %q", c.alg, store, stdout, stderr, code, c.want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow, keyrate.SlidingLog} {
		for _, hw := range [][2]int64{{3, 10}, {7, 100}, {1, 1}, {10, 3}, {1000, 99999}, {13, 1_000_000_000}} {
			reqs := randomRequests(rng, hw[0], hw[1], rng.Int64N(1e12), 2000)
			want := windowReference(alg, hw[0], hw[1], reqs)
			for _, store := range storeNames {
				if alg == keyrate.SlidingLog && store == "atomic" {
					continue
				}
				stdout, stderr, code := replayCmd(t, stream(hw[0], hw[1], reqs), "-algorithm", alg.String(), "-store", store)
				if code != 0 || stdout != want {
					t.Fatalf("%v capacity %d window %d -store %s: status %d, stderr %q; differs from the model", alg, hw[0], hw[1], store, code, stderr)
				}
			}
		}
	}
	for _, c := range []struct{ input, alg, want string }{
		{"1073741824\n1\n0\n", "sliding-window", "line 2: capacity 1073741824 with window 1 cannot be represented"},
		{"1073741824\n1\n0\n", "fixed-window", "line 2: capacity 1073741824 with window 1 cannot be represented"},
		{"3\n10\n1\nrequest a 0\n", "leaky-bucket", "invalid value \"leaky-bucket\" for flag -algorithm: want token-bucket, fixed-window, sliding-window or sliding-log"},
		{"65537\n10\n0\n", "sliding-log", "line 2: capacity 65537 with window 10 cannot be represented"},
	} {
		stdout, stderr, code := replayCmd(t, c.input, "-algorithm", c.alg, "-store", "mutex")
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("-algorithm %s on %q: (%q, %q, %d), want status 2 and one line with %q", c.alg, c.input, stdout, stderr, code, c.want)
		}
	}
}

// FuzzReplayWindows compares replay -algorithm with the window model on
// small random streams.
func FuzzReplayWindows(f *testing.F) {
	f.Add(false, uint16(3), uint32(10), []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 3, 0, 3})
	f.Add(true, uint16(7), uint32(100), []byte{1, 0, 1, 0, 1, 0, 1, 0, 1, 14, 1, 1})
	f.Fuzz(func(t *testing.T, sliding bool, c uint16, w uint32, ops []byte) {
		capacity, window := int64(c%1000)+1, int64(w%100_000)+1
		alg := keyrate.FixedWindow
		if sliding {
			alg = keyrate.SlidingWindow
		}
		var reqs []request
		var ts int64
		for i := 0; i+1 < len(ops); i += 2 {
			if step := int64(ops[i+1]); step < 128 {
				ts += step
			} else {
				ts += (step - 128) * (window/16 + 1)
			}
			reqs = append(reqs, request{client: fmt.Sprint("c", ops[i]%4), ts: ts})
		}
		want := windowReference(alg, capacity, window, reqs)
		stdout, stderr, code := replayCmd(t, stream(capacity, window, reqs), "-algorithm", alg.String())
		if code != 0 || stdout != want {
			t.Fatalf("%v capacity %d window %d %v: got (%q, %q, %d), want %q", alg, capacity, window, reqs, stdout, stderr, code, want)
		}
	})
}

// FuzzReplayLog compares replay -algorithm sliding-log with the log model
// on small random streams, on the two stores that carry the log.
func FuzzReplayLog(f *testing.F) {
	f.Add(false, uint16(3), uint32(10), []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 3, 0, 3})
	f.Add(true, uint16(7), uint32(100), []byte{1, 0, 1, 0, 1, 0, 1, 0, 1, 14, 1, 1})
	f.Fuzz(func(t *testing.T, striped bool, c uint16, w uint32, ops []byte) {
		capacity, window := int64(c%1000)+1, int64(w%100_000)+1
		store := "mutex"
		if striped {
			store = "striped"
		}
		var reqs []request
		var ts int64
		for i := 0; i+1 < len(ops); i += 2 {
			if step := int64(ops[i+1]); step < 128 {
				ts += step
			} else {
				ts += (step - 128) * (window/16 + 1)
			}
			reqs = append(reqs, request{client: fmt.Sprint("c", ops[i]%4), ts: ts})
		}
		want := windowReference(keyrate.SlidingLog, capacity, window, reqs)
		stdout, stderr, code := replayCmd(t, stream(capacity, window, reqs), "-algorithm", "sliding-log", "-store", store)
		if code != 0 || stdout != want {
			t.Fatalf("sliding-log -store %s capacity %d window %d %v: got (%q, %q, %d), want %q", store, capacity, window, reqs, stdout, stderr, code, want)
		}
	})
}

// TestReplayStoreCannotCarryAlgorithm: -algorithm sliding-log with a store
// that cannot carry it (atomic, the default) is a usage error naming both
// flags and the stores that can, before any input is read, not an error
// blamed on a line of the input.
func TestReplayStoreCannotCarryAlgorithm(t *testing.T) {
	for _, args := range [][]string{{"-algorithm", "sliding-log"}, {"-store", "atomic", "-algorithm", "sliding-log"}} {
		out, errOut, code := replayCmd(t, "3\n60\n1\nrequest a 0\n", args...)
		want := "keyrate replay: -store atomic cannot carry -algorithm sliding-log: use -store mutex or striped\n"
		if code != 2 || out != "" || errOut != want {
			t.Errorf("replay %q: code %d, stdout %q, stderr %q; want 2, nothing, %q", args, code, out, errOut, want)
		}
	}
	for _, store := range []string{"mutex", "striped"} {
		if out, errOut, code := replayCmd(t, "3\n60\n1\nrequest a 0\n", "-store", store, "-algorithm", "sliding-log"); code != 0 || out != "allow\n" {
			t.Errorf("replay -store %s -algorithm sliding-log: code %d, stdout %q, stderr %q", store, code, out, errOut)
		}
	}
}
