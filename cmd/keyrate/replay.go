package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

func init() {
	commands["replay"] = command{
		run:     runReplay,
		summary: "decide a recorded request stream and print allow or deny for each",
	}
}

// replayHelp is the text of "keyrate replay -h", before the flag list.
const replayHelp = `usage: keyrate replay [-store mutex|striped|atomic] [-algorithm name] < input

Replay reads a request stream on stdin, decides every request with a store
on a manual clock, and prints "allow" or "deny" for each, one per line.

The input is three header lines, each one integer, then the commands:

	capacity   the bucket's burst, and the tokens added per window (>= 1)
	window     the time units a full refill takes (>= 1)
	n          the number of commands that follow (>= 0)
	request <client> <timestamp>    (n times)

A request spends one token of client's bucket at the integer timestamp.
Timestamps are at least 0, at most 2^62·gcd(capacity, window)/capacity
(over 4.6·10^15 for any capacity up to 1000), and never decrease across
the stream. A client is any non-empty run of non-space bytes. Fields are
separated by spaces or tabs (any ASCII white space); a line holds at most
1 MiB, not counting its line ending. Blank lines after the last command
are ignored; anywhere else they are an error. Decisions are exact: they
equal those of a token bucket counted in rationals.

With -algorithm other than token-bucket, capacity is the limit N and
window the window's length W, windows are aligned to time 0 of the stream
(a request at t is in window ⌊t/W⌋), and a denied request counts nowhere:

	fixed-window     allowed iff the requests allowed in t's window are
	                 fewer than N
	sliding-window   with p and q the requests allowed in the previous and
	                 the current window, and e = t mod W: allowed iff
	                 p·(W − e) + (q + 1)·W ≤ N·W
	sliding-log      allowed iff the requests allowed in (t − W, t] are
	                 fewer than N

The largest timestamp is then the end of the last window the state can
count (see keyrate.Algorithm): over 8·10^12 windows for any capacity up to
1000. A capacity too large for any window is an error on line 2. The
sliding log counts a time unit as 1ns, and takes a capacity of at most
65536 (keyrate.MaxLogRate), a window of at most 2^60, timestamps up to
2^62 − window, and -store mutex or striped (atomic cannot carry it).

On bad input replay prints one line on stderr naming the input line at
fault, prints nothing on stdout, and exits with status 2.

Flags:
`

// maxLine is the longest input line replay accepts, in bytes, not counting
// its line ending.
const maxLine = 1 << 20

// replayStores are the stores -store selects, in the order usage lists them.
var replayStores = []struct {
	name string
	new  func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)
}{
	{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return mutexbucket.New(l, o...) }},
	{"striped", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return striped.New(l, o...) }},
	{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return atomicbucket.New(l, o...) }},
}

// storeFlag is the value of -store: an index into replayStores.
type storeFlag int

func (f *storeFlag) String() string { return replayStores[*f].name }

func (f *storeFlag) Set(s string) error {
	names := make([]string, len(replayStores))
	for i, st := range replayStores {
		if st.name == s {
			*f = storeFlag(i)
			return nil
		}
		names[i] = st.name
	}
	return fmt.Errorf("want %s or %s", strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// algorithmFlag is the value of -algorithm.
type algorithmFlag keyrate.Algorithm

func (f *algorithmFlag) String() string { return keyrate.Algorithm(*f).String() }

func (f *algorithmFlag) Set(s string) error {
	a, err := keyrate.ParseAlgorithm(s)
	if err != nil {
		return errors.New("want token-bucket, fixed-window, sliding-window or sliding-log")
	}
	*f = algorithmFlag(a)
	return nil
}

// runReplay is the replay subcommand. It returns 0 on success, 1 if reading
// stdin or writing stdout fails, and 2 for a usage error or bad input.
func runReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	store := storeFlag(len(replayStores) - 1) // atomic
	alg := algorithmFlag(keyrate.TokenBucket)
	fs := flag.NewFlagSet("keyrate replay", flag.ContinueOnError)
	fs.Var(&store, "store", "the `name` of the store that decides: mutex, striped or atomic")
	fs.Var(&alg, "algorithm", "the `name` of the algorithm: token-bucket, fixed-window, sliding-window or sliding-log")
	if err := parseFlags(fs, args, replayHelp, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "keyrate replay: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keyrate replay: unexpected argument %q (the input is read from stdin)\n", fs.Arg(0))
		return 2
	}
	// A store that cannot carry the algorithm is the flags' fault, not
	// the input's: say so before reading it.
	probe := keyrate.Limit{Rate: 1, Per: time.Second}.Using(keyrate.Algorithm(alg))
	if l, err := replayStores[store].new(probe); errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		fmt.Fprintf(stderr, "keyrate replay: -store %s cannot carry -algorithm %s: use -store mutex or striped\n", &store, &alg)
		return 2
	} else if c, ok := l.(io.Closer); ok && err == nil {
		c.Close()
	}

	var out bytes.Buffer
	if err := replay(stdin, keyrate.Algorithm(alg), replayStores[store].new, &out); err != nil {
		fmt.Fprintln(stderr, err)
		var le *lineError
		if errors.As(err, &le) {
			return 2
		}
		return 1
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		fmt.Fprintf(stderr, "keyrate replay: %v\n", err)
		return 1
	}
	return 0
}

// lineError is bad input: what is wrong, and on which line.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// replay decides the stream read from r with a store made by newStore,
// writing "allow" or "deny" lines to out. It decides each request as it
// reads it, holding only the store's buckets and the output. It returns a
// *lineError for bad input, in which case out holds a partial result that
// must not be shown, and any other error for a failed read.
func replay(r io.Reader, alg keyrate.Algorithm, newStore func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error), out *bytes.Buffer) error {
	in := newLines(r)
	capacity, err := in.header("capacity", 1, math.MaxInt)
	if err != nil {
		return err
	}
	window, err := in.header("window", 1, math.MaxInt64)
	if err != nil {
		return err
	}

	// One time unit is u ns. For the token bucket u is
	// capacity/gcd(capacity, window), so that a token takes
	// window·u/capacity = window/gcd ns, a whole number: the policy then
	// counts in whole nanoseconds and is exact. The window algorithms are
	// exact at any unit: u is the least that gives the rule its ten-year
	// clock range (windowUnit).
	u := capacity / gcd(capacity, window)
	switch {
	case alg.Windowed():
		u = windowUnit(capacity, window)
	case alg == keyrate.SlidingLog: // exact at any unit, and its range is the token bucket's
		u = 1
	}
	cannot := func(why string) error {
		return in.errorf("capacity %d with window %d cannot be represented: %s", capacity, window, why)
	}
	if window > math.MaxInt64/u {
		return cannot(fmt.Sprintf("a window of %d units of %dns overflows time.Duration", window, u))
	}
	limit := keyrate.Limit{Rate: int(capacity), Per: time.Duration(window * u), Burst: int(capacity)}.Using(alg)
	clk := clock.NewManual(0) // the store's epoch is the reading at New: 0
	policy, err := rules.NewRule(limit, clk)
	if err != nil {
		return cannot(err.Error())
	}
	if !policy.Exact() {
		return cannot("the library would round it") // unreachable with u as above
	}
	store, err := newStore(limit, keyrate.WithClock(clk))
	if err != nil {
		return cannot(err.Error())
	}
	// A reading past the store's clock range saturates, so replay rejects
	// timestamps that would map past it.
	maxTS := int64(policy.Range()) / u

	n, err := in.header("command count", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	var last int64
	for i := range n {
		f, ok, err := in.next()
		if err != nil {
			return err
		}
		if !ok || len(f) == 0 {
			return in.missing(i, n, !ok)
		}
		if string(f[0]) != "request" {
			return in.errorf("unknown command %s, want request", quote(f[0]))
		}
		switch len(f) {
		case 1:
			return in.errorf("missing client and timestamp")
		case 2:
			return in.errorf("missing timestamp")
		case 3:
		default:
			return in.errorf("extra field %s after the timestamp", quote(f[3]))
		}
		ts, msg := integer("timestamp", f[2], 0, maxTS)
		if msg != "" {
			if ts > maxTS {
				msg += fmt.Sprintf(", the largest with capacity %d and window %d", capacity, window)
			}
			return in.errorf("%s", msg)
		}
		if ts < last {
			return in.errorf("timestamp %d is before %d", ts, last)
		}
		last = ts
		clk.Set(time.Duration(ts * u))
		if store.Allow(string(f[1])) {
			out.WriteString("allow\n")
		} else {
			out.WriteString("deny\n")
		}
	}
	for {
		f, ok, err := in.next()
		if err != nil || !ok {
			return err
		}
		if len(f) > 0 {
			return in.errorf("more than %s", commandCount(n))
		}
	}
}

// commandCount returns "1 command" or "n commands".
func commandCount(n int64) string {
	if n == 1 {
		return "1 command"
	}
	return fmt.Sprintf("%d commands", n)
}

// windowUnit returns the nanoseconds per time unit for a window algorithm:
// the least that gives a window of window units the ten-year clock range
// a window rule needs (see keyrate.Algorithm), given the bits its two
// counts (the window's and the previous one's) of capacity take; 1 if none
// does.
func windowUnit(capacity, window int64) int64 {
	fields := 2 * bits.Len64(uint64(capacity))
	if fields > 60 {
		return 1
	}
	windows := uint64(1)<<(63-fields) - 3 // the windows the state can count
	const tenYears = 1 << 62 / keyrate.MaxScale
	per := new(big.Int).Mul(new(big.Int).SetUint64(windows), big.NewInt(window)) // ns per unit of 1
	u := new(big.Int).Add(big.NewInt(tenYears), new(big.Int).Sub(per, big.NewInt(1)))
	u.Quo(u, per)
	if !u.IsInt64() || u.Int64() < 1 {
		return 1
	}
	return u.Int64()
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// lines reads the input a line at a time, split into fields, counting
// lines from 1.
type lines struct {
	sc     *bufio.Scanner
	line   int      // the number of the line last read
	fields [][]byte // reused by next
}

func newLines(r io.Reader) *lines {
	sc := bufio.NewScanner(r)
	// Room for a line of maxLine bytes and its "\r\n": a longer one is
	// either refused by the scanner or caught by next.
	sc.Buffer(make([]byte, 64<<10), maxLine+2)
	return &lines{sc: sc, fields: make([][]byte, 0, 4)}
}

// next reads the next line and returns its fields, valid until the next
// call; ok is false at the end of the input. A line over maxLine bytes is a
// *lineError; a failed read is returned as it is.
func (in *lines) next() (fields [][]byte, ok bool, err error) {
	if !in.sc.Scan() {
		err := in.sc.Err()
		if errors.Is(err, bufio.ErrTooLong) {
			in.line++
			return nil, false, in.tooLong()
		}
		return nil, false, err
	}
	in.line++
	b := in.sc.Bytes()
	if len(b) > maxLine {
		return nil, false, in.tooLong()
	}
	in.fields = in.fields[:0]
	for len(b) > 0 {
		i := 0
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		if j > i {
			in.fields = append(in.fields, b[i:j])
		}
		b = b[j:]
	}
	return in.fields, true, nil
}

// isSpace reports whether c separates fields: a space, a tab, or another
// ASCII white-space byte.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

func (in *lines) tooLong() error {
	return in.errorf("line is longer than %d bytes", maxLine)
}

// errorf returns a *lineError for the line last read.
func (in *lines) errorf(format string, args ...any) error {
	return &lineError{line: in.line, msg: fmt.Sprintf(format, args...)}
}

// header reads a header line: one integer named name, in [lo, hi].
func (in *lines) header(name string, lo, hi int64) (int64, error) {
	f, ok, err := in.next()
	switch {
	case err != nil:
		return 0, err
	case !ok:
		in.line++ // the missing line is the one after the last
		fallthrough
	case len(f) == 0:
		return 0, in.errorf("missing %s", name)
	case len(f) > 1:
		return 0, in.errorf("extra field %s after the %s", quote(f[1]), name)
	}
	v, msg := integer(name, f[0], lo, hi)
	if msg != "" {
		if in.line == 1 && bytes.HasPrefix(f[0], byteOrderMark) {
			msg += ": " + bomHint("input")
		}
		return 0, in.errorf("%s", msg)
	}
	return v, nil
}

// byteOrderMark is U+FEFF in UTF-8, which some editors write at the start
// of a file: neither replay's input nor a policies file may begin with it.
var byteOrderMark = []byte("\ufeff")

// bomHint is what an error on a first line that begins with
// byteOrderMark adds: what, "input" or "file", starts with it.
func bomHint(what string) string {
	return "the " + what + " starts with a UTF-8 byte-order mark; save it without one"
}

// missing returns the error for command i (from 0) of n not being where it
// should: the line last read is blank, or the input ended there (eof). If
// every line left is blank the input is short, and the error is on the
// first missing line; otherwise the blank line is the error.
func (in *lines) missing(i, n int64, eof bool) error {
	at := in.line
	if eof {
		at++
	}
	for !eof {
		f, ok, err := in.next()
		var le *lineError
		if err != nil && !errors.As(err, &le) {
			return err
		}
		if err != nil || (ok && len(f) > 0) {
			return &lineError{line: at, msg: fmt.Sprintf("blank line where command %d of %d should be", i+1, n)}
		}
		eof = !ok
	}
	return &lineError{line: at, msg: fmt.Sprintf("input ends after %d of %s", i, commandCount(n))}
}

// integer parses field as a base-10 integer named name that must lie in
// [lo, hi]. It returns the value, or a message saying why it is not
// acceptable; for a value above hi the returned value is above hi too.
func integer(name string, field []byte, lo, hi int64) (int64, string) {
	v, err := strconv.ParseInt(string(field), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && field[0] == '-',
		err == nil && v < lo:
		if lo == 0 {
			return v, fmt.Sprintf("%s %s is negative", name, cut(field))
		}
		return v, fmt.Sprintf("%s %s is below %d", name, cut(field), lo)
	case errors.Is(err, strconv.ErrRange),
		err == nil && v > hi:
		return math.MaxInt64, fmt.Sprintf("%s %s is above %d", name, cut(field), hi)
	case err != nil:
		return 0, fmt.Sprintf("%s %s is not an integer", name, quote(field))
	}
	return v, ""
}

// mostQuoted is the most bytes of a field an error message shows.
const mostQuoted = 40

// quote returns field as a Go string literal, shortened to its first
// mostQuoted bytes and "..." if longer, for an error message.
func quote(field []byte) string {
	if len(field) > mostQuoted {
		return strconv.Quote(string(field[:mostQuoted])) + "..."
	}
	return strconv.Quote(string(field))
}

// cut returns field, a number (ASCII, printable), shortened to its first
// mostQuoted bytes and "..." if longer, for an error message: an integer
// out of int64's range can be a whole line of digits.
func cut(field []byte) string {
	if len(field) > mostQuoted {
		return string(field[:mostQuoted]) + "..."
	}
	return string(field)
}
