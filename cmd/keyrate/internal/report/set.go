// Package report turns the raw output of keyrate's benchmarks (package
// bench) into the comparison report: a markdown page with SVG charts of
// throughput, tables of medians with their 95% intervals, each store's
// ratio to the floor and x/time/rate baselines, each policy row's ratio to
// its one-window row and each store's Wait and Reserve to its AllowN (with
// an interval and a p-value), allocations, memory and GC time, httplimit
// against the middlewares a user would pick instead, the performance
// targets checked one by one, and a summary of which store to pick for
// which workload, all generated from the numbers. A quick set (make
// report's, with fewer than a million keys) says in its header what it
// cannot show. A set measured at three or more core counts within its
// machine's CPUs gets a section across core counts: which store to pick
// over each range of them, and each subject's scaling from 1 to N cores
// against the floor's (cores.go). An outside harness's peers.txt beside
// the results gets a section of its own (peers.go).
// Given a second result set it adds before/after deltas with p-values.
//
// It reads results with golang.org/x/perf (benchfmt to parse, benchproc to
// project each value onto its cell, benchmath for medians, intervals and
// Mann-Whitney U tests) and draws with gonum.org/v1/plot. The command is
// "keyrate report" (cmd/keyrate/report.go).
package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
)

// Names of the benchmarks, workloads and baselines the report knows; the
// rest of the data (other stores and variants) is reported as found.
const (
	benchAllow  = "Allow"
	benchMemory = "Memory"
	benchRedis  = "Redis"
	benchHotKey = "HotKey"
	benchMW     = "Middleware"
	// benchLean is BenchmarkLeanFloor: the floor's three operations
	// inline in b.RunParallel, with no call through the driver (see
	// package bench), on some of the workloads. Its cells are
	// Cell{Bench: benchLean, Subject: floor, ...}.
	benchLean = "LeanFloor"
	floor     = "floor"
	xrate     = "xrate"
	churn     = "churn"
)

// Units the report reads, as the benchmarks print them.
const (
	unitNs     = "ns/op"
	unitAllocs = "allocs/op"
	unitBytes  = "B/op"
	unitKey    = "B/key"
	unitGC     = "gc-ns"
	unitP50    = "p50-ns"
	unitP99    = "p99-ns"
	unitRetry  = "retries/op"
	unitAllows = "allows/s"
	unitKeys   = "keys" // BenchmarkMemory's key count
)

// BenchmarkAllow's wait rows (op= values, see package bench): a store's
// Wait and Reserve, needing no wait, and AllowN, their baseline.
const (
	opAllowN  = "allown"
	opWait    = "wait"
	opReserve = "reserve"
)

// BenchmarkRedis operations (op= values).
const (
	redisAllow = "allow"
	redisEmpty = "evalsha-empty"
	// redisPaired is allow measured call by call beside the empty EVALSHA
	// and the floor script, with one client: its p50-ns is allow's, and
	// it reports the others' medians as unitFloorP50 and unitEmptyP50.
	redisPaired = "paired"
)

// op=paired's units beside allow's p50-ns and p99-ns.
const (
	unitFloorP50 = "floor-p50-ns"
	unitEmptyP50 = "empty-p50-ns"
)

// Cell identifies one sample: one benchmark of one subject on one workload
// at one GOMAXPROCS, in one unit. For Redis, the subject is the op= value,
// Clients the clients= value and Procs 0: that benchmark runs at one
// GOMAXPROCS only, and its client goroutines are what varies.
type Cell struct {
	Bench    string // "Allow", "Memory" or "Redis"
	Subject  string // store name with its variant keys: "atomic/clock=coarse"; op for Redis
	Workload string // wl= value; "" for Memory and Redis
	Procs    int    // GOMAXPROCS; 0 for Redis
	Clients  int    // clients= value for Redis; 0 otherwise
	Unit     string // as printed: "ns/op", "B/key", ...
}

// Set is one result set: every sample of one benchmark run, and the facts
// about the machine it ran on.
type Set struct {
	// Label names the set in the report: the directory or file it came from.
	Label string
	// Machine is the contents of machine.txt, in order; empty if absent.
	Machine []Fact
	// Subjects, Workloads and Procs list the values found, subjects and
	// workloads in first-seen order, procs ascending. Subjects holds no
	// policy row and no op row.
	Subjects, Workloads []string
	Procs               []int

	// PolicyRows lists the subjects whose names carry a policy= part
	// ("atomic/policy=2windows"), in first-seen order: a store under a
	// policy, run on a few workloads beside its one-window subject (see
	// policyOf).
	PolicyRows []string

	// OpRows lists the subjects of BenchmarkAllow whose names carry an
	// op= part ("atomic/op=wait"), in first-seen order: a store measured
	// by a call other than Allow, on a few workloads beside its op=allown
	// row, AllowN (see opOf).
	OpRows []string

	// RedisClients lists the client goroutine counts BenchmarkRedis ran
	// at, ascending; empty when the set has no Redis results.
	RedisClients []int

	// RedisOps lists BenchmarkRedis's op= values, in first-seen order.
	RedisOps []string

	// Middlewares lists BenchmarkMiddleware's mw= values, in first-seen
	// order; MiddlewareRuns its other parts ("keys=1k/outcome=allowed"),
	// in first-seen order; MiddlewareProcs its core counts, ascending.
	// Empty when the set has no BenchmarkMiddleware results.
	Middlewares, MiddlewareRuns []string
	MiddlewareProcs             []int

	// Warnings lists the lines skipped, in line order, each with its
	// file, its line and why: a line that does not parse or is longer
	// than the benchmark format's 64 KiB, a value that is not a finite
	// number or cannot be a measurement (a negative figure, a time of
	// zero), a name holding '|' (which would split its table cells), a
	// BenchmarkAllow result without its store= or wl= part.
	Warnings []string

	// Peers is the outside harness's results (PeersFile) that came with
	// the set, or nil; the set's Warnings include its lines skipped.
	Peers *Set

	samples map[Cell]*benchmath.Sample
	values  map[Cell][]float64
}

// Fact is one "key: value" line of machine.txt.
type Fact struct{ Key, Value string }

// Load reads a result set from path: a directory holding bench.txt (the raw
// output) and machine.txt (the machine's facts), as bench/run.sh writes
// them, or a single raw output file, with machine.txt beside it if present.
func Load(path string) (*Set, error) {
	benchFile, machineFile := path, filepath.Join(filepath.Dir(path), "machine.txt")
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if fi.IsDir() {
		benchFile, machineFile = filepath.Join(path, "bench.txt"), filepath.Join(path, "machine.txt")
	}
	f, err := openFile(benchFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Read(f, filepath.ToSlash(filepath.Clean(path)))
	if err != nil {
		return nil, err
	}
	if m, err := openFile(machineFile); err == nil {
		defer m.Close()
		if s.Machine, err = ReadMachine(m); err != nil {
			return nil, fmt.Errorf("%s: %w", machineFile, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if benchFile != path { // a directory: it may hold PeersFile
		if s.Peers, err = loadPeers(path, s.Machine); err != nil {
			return nil, err
		}
		if s.Peers != nil {
			s.Warnings = append(s.Warnings, s.Peers.Warnings...)
		}
	}
	return s, nil
}

// openFile opens path for reading; a directory there is an error naming
// it, rather than a failed read later.
func openFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	}
	return f, nil
}

// ReadMachine parses machine.txt: one "key: value" fact a line.
func ReadMachine(r io.Reader) ([]Fact, error) {
	var facts []Fact
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want \"key: value\", got %q", n, line)
		}
		facts = append(facts, Fact{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return facts, sc.Err()
}

// Read parses raw benchmark output (the Go benchmark format) from r.
// Benchmarks other than Allow, Memory, Middleware, Redis and HotKey are
// ignored; the lines it skips are listed in Warnings (see there); a set
// with no Allow results is an error, which names the first line skipped,
// if any.
func Read(r io.Reader, label string) (*Set, error) {
	var pp benchproc.ProjectionParser
	proj, unitField, err := pp.ParseWithUnit(".name,.subject,/wl,/gomaxprocs", nil)
	if err != nil {
		return nil, err
	}
	fields := proj.Fields()
	s := &Set{Label: label, values: map[Cell][]float64{}}
	seenSubj, seenWl, seenProcs, seenClients := map[string]bool{}, map[string]bool{}, map[int]bool{}, map[int]bool{}
	var warns []warning
	warn := func(res *benchfmt.Result, format string, args ...any) {
		file, line := res.Pos()
		warns = append(warns, warning{line, fmt.Sprintf("%s:%d: %s: ", file, line, benchName(res)) + fmt.Sprintf(format, args...)})
	}
	lr := newLineLimiter(r)
	br := benchfmt.NewReader(lr, label)
	for br.Scan() {
		var res *benchfmt.Result
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			// A line cut short (a run still going, or killed) is skipped
			// and reported, not fatal.
			_, line := rec.Pos()
			warns = append(warns, warning{line, rec.Error()})
			continue
		case *benchfmt.Result:
			res = rec
		default:
			continue
		}
		if w := badValue(res); w != "" {
			// Skipped and reported: a NaN would never let a U test
			// return, and an infinity, a negative figure or a time of
			// zero is no measurement either.
			warn(res, "%s", w)
			continue
		}
		if bytes.IndexByte(res.Name, '|') >= 0 {
			// A '|' would split the name's cell in every table.
			warn(res, "a name holding '|' cannot be a table cell")
			continue
		}
		base, parts := res.Name.Parts()
		if string(base) == benchRedis {
			// Kept apart: its ops and client counts are not stores,
			// workloads or core counts.
			op, clients, ok := redisName(parts)
			if !ok {
				warn(res, "want op= and clients= parts")
				continue
			}
			for _, v := range res.Values {
				unit, val := printed(v)
				c := Cell{Bench: benchRedis, Subject: op, Clients: clients, Unit: unit}
				s.values[c] = append(s.values[c], val)
			}
			if !seenClients[clients] {
				seenClients[clients] = true
				s.RedisClients = append(s.RedisClients, clients)
			}
			if !slices.Contains(s.RedisOps, op) {
				s.RedisOps = append(s.RedisOps, op)
			}
			continue
		}
		if string(base) == benchMW {
			// BenchmarkMiddleware: mw=<middleware>/<run parts>-<procs>,
			// kept apart from the stores.
			mw, run, procs, ok := middlewareName(parts)
			if !ok {
				warn(res, "want an mw= part and a GOMAXPROCS suffix that is a number")
				continue
			}
			for _, v := range res.Values {
				unit, val := printed(v)
				c := mwCell(mw, run, procs, unit)
				s.values[c] = append(s.values[c], val)
			}
			if !slices.Contains(s.Middlewares, mw) {
				s.Middlewares = append(s.Middlewares, mw)
			}
			if !slices.Contains(s.MiddlewareRuns, run) {
				s.MiddlewareRuns = append(s.MiddlewareRuns, run)
			}
			if !slices.Contains(s.MiddlewareProcs, procs) {
				s.MiddlewareProcs = append(s.MiddlewareProcs, procs)
			}
			continue
		}
		if string(base) == benchHotKey {
			// redisbucket's BenchmarkHotKey: op=allow/leases=true|false,
			// one GOMAXPROCS; kept by its leases= value.
			leases, ok := hotKeyName(parts)
			if !ok {
				warn(res, "want a leases= part")
				continue
			}
			for _, v := range res.Values {
				unit, val := printed(v)
				c := hotKeyCell(leases, unit)
				s.values[c] = append(s.values[c], val)
			}
			continue
		}
		if b := string(base); b != benchAllow && b != benchMemory && b != benchLean {
			continue
		}
		// Without its store (or, for Allow, its workload) a result has
		// no row or column in any table.
		if string(base) != benchLean && !hasPart(parts, "store") {
			warn(res, "want a store= part")
			continue
		}
		if string(base) != benchMemory && !hasPart(parts, "wl") {
			warn(res, "want a wl= part")
			continue
		}
		if string(base) == benchLean {
			res.SetConfig(".subject", floor)
		} else {
			res.SetConfig(".subject", subjectOf(parts))
		}
		for i, key := range proj.ProjectValues(res) {
			procs := 1 // go test omits the -N suffix for GOMAXPROCS=1
			if p := key.Get(fields[3]); p != "" {
				if procs, err = strconv.Atoi(p); err != nil {
					file, line := res.Pos()
					return nil, fmt.Errorf("%s:%d: %s: bad GOMAXPROCS suffix", file, line, benchName(res))
				}
			}
			c := Cell{
				Bench:    key.Get(fields[0]),
				Subject:  key.Get(fields[1]),
				Workload: key.Get(fields[2]),
				Procs:    procs,
				Unit:     key.Get(unitField),
			}
			v := res.Values[i]
			c.Unit, v.Value = printed(v)
			s.values[c] = append(s.values[c], v.Value)
			if c.Bench == benchLean {
				// The lean floor: no subject, workload or core count
				// of its own, only a figure beside the floor's.
				continue
			}
			if !seenSubj[c.Subject] {
				seenSubj[c.Subject] = true
				if _, _, ok := opOf(c.Subject); ok {
					s.OpRows = append(s.OpRows, c.Subject)
				} else if _, _, ok := policyOf(c.Subject); ok {
					s.PolicyRows = append(s.PolicyRows, c.Subject)
				} else {
					s.Subjects = append(s.Subjects, c.Subject)
				}
			}
			if c.Workload != "" && !seenWl[c.Workload] {
				seenWl[c.Workload] = true
				s.Workloads = append(s.Workloads, c.Workload)
			}
			if c.Bench == benchAllow && !seenProcs[procs] {
				seenProcs[procs] = true
				s.Procs = append(s.Procs, procs)
			}
		}
	}
	if err := br.Err(); err != nil {
		if e := (*errEndless)(nil); errors.As(err, &e) {
			return nil, fmt.Errorf("%s:%d: %w", label, e.line, e)
		}
		return nil, err
	}
	for _, l := range lr.long {
		warns = append(warns, warning{l.line, fmt.Sprintf("%s:%d: a line of %d bytes, longer than the %d bytes the benchmark format reader takes (it starts %q)",
			label, l.line, l.bytes, maxLine, l.start)})
	}
	slices.SortStableFunc(warns, func(a, b warning) int { return a.line - b.line })
	for _, w := range warns {
		s.Warnings = append(s.Warnings, w.text)
	}
	if len(s.Workloads) == 0 {
		if n := len(s.Warnings); n > 0 {
			lines := "lines"
			if n == 1 {
				lines = "line"
			}
			return nil, fmt.Errorf("%s: no BenchmarkAllow results (skipped %d %s, the first: %s)", label, n, lines, s.Warnings[0])
		}
		return nil, fmt.Errorf("%s: no BenchmarkAllow results", label)
	}
	slices.Sort(s.Procs)
	slices.Sort(s.RedisClients)
	slices.Sort(s.MiddlewareProcs)
	s.samples = make(map[Cell]*benchmath.Sample, len(s.values))
	for c, v := range s.values {
		s.samples[c] = benchmath.NewSample(v, &benchmath.DefaultThresholds)
	}
	return s, nil
}

// warning is one line Read skipped: its line number, and what to say.
type warning struct {
	line int
	text string
}

// badValue says why a result's values are no measurement, or returns
// "": a value that is not a finite number (NaN or an infinity), a
// negative one (no unit the benchmarks report can be), or a time per
// call of zero. It quotes the value as the file has it.
func badValue(res *benchfmt.Result) string {
	for _, v := range res.Values {
		unit, val := printed(v)
		switch {
		case math.IsNaN(val) || math.IsInf(val, 0):
			return fmt.Sprintf("%v %s is not a finite number", val, unit)
		case val < 0:
			return fmt.Sprintf("%v %s is negative", val, unit)
		case val == 0 && unit == unitNs:
			return fmt.Sprintf("%v %s: a call takes some time", val, unit)
		}
	}
	return ""
}

// maxNameQuote is how much of a benchmark name a warning quotes.
const maxNameQuote = 120

// benchName is a result's benchmark name as the results file spells it,
// with its Benchmark prefix (benchfmt drops it), so that a user can grep
// the file for it; cut to maxNameQuote bytes, and quoted if it holds a
// character that would not print.
func benchName(res *benchfmt.Result) string {
	name := "Benchmark" + string(res.Name.Full())
	cut := ""
	if len(name) > maxNameQuote {
		n := maxNameQuote
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name, cut = name[:n], fmt.Sprintf("… (%d bytes)", len(name))
	}
	if strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) {
		name = strconv.Quote(name)
	}
	return name + cut
}

// hasPart reports whether a benchmark name's parts have a key= part.
func hasPart(parts [][]byte, key string) bool {
	for _, p := range parts {
		if strings.HasPrefix(strings.TrimPrefix(string(p), "/"), key+"=") {
			return true
		}
	}
	return false
}

// subjectOf returns the subject a benchmark name's parts describe: the
// store= value, followed by every other key=value part but wl= and the
// GOMAXPROCS suffix ("atomic/clock=coarse").
func subjectOf(parts [][]byte) string {
	var store string
	var variant []string
	for _, p := range parts {
		part := string(p)
		switch {
		case strings.HasPrefix(part, "/store="):
			store = strings.TrimPrefix(part, "/store=")
		case strings.HasPrefix(part, "/wl="), strings.HasPrefix(part, "-"):
		default:
			variant = append(variant, strings.TrimPrefix(part, "/"))
		}
	}
	return strings.Join(append([]string{store}, variant...), "/")
}

// policyOf splits a policy row's subject ("atomic/policy=2windows") into
// the subject it is measured against, the same without the policy= part
// ("atomic"), and the policy ("2windows"); ok is false for a subject with
// no policy= part.
func policyOf(subject string) (base, policy string, ok bool) {
	parts := strings.Split(subject, "/")
	for i, p := range parts {
		if v, found := strings.CutPrefix(p, "policy="); found {
			return strings.Join(slices.Delete(parts, i, i+1), "/"), v, true
		}
	}
	return "", "", false
}

// opOf splits an op row's subject ("atomic/op=wait") into the store, the
// same without the op= part ("atomic"), and the op ("wait"); ok is false
// for a subject with no op= part.
func opOf(subject string) (store, op string, ok bool) {
	parts := strings.Split(subject, "/")
	for i, p := range parts {
		if v, found := strings.CutPrefix(p, "op="); found {
			return strings.Join(slices.Delete(parts, i, i+1), "/"), v, true
		}
	}
	return "", "", false
}

// withOp returns an op row's subject with its op= part set to op, in
// place: withOp("atomic/op=wait/clock=coarse", "allown") is
// "atomic/op=allown/clock=coarse".
func withOp(subject, op string) string {
	parts := strings.Split(subject, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "op=") {
			parts[i] = "op=" + op
		}
	}
	return strings.Join(parts, "/")
}

// redisName returns the op= and clients= values of a BenchmarkRedis
// name's parts, and false if either is missing or clients is not a number.
func redisName(parts [][]byte) (op string, clients int, ok bool) {
	var haveClients bool
	for _, p := range parts {
		part := strings.TrimPrefix(string(p), "/")
		switch {
		case strings.HasPrefix(part, "op="):
			op = strings.TrimPrefix(part, "op=")
		case strings.HasPrefix(part, "clients="):
			n, err := strconv.Atoi(strings.TrimPrefix(part, "clients="))
			if err != nil {
				return "", 0, false
			}
			clients, haveClients = n, true
		}
	}
	return op, clients, op != "" && haveClients
}

// hotKeyName returns the leases= value of a BenchmarkHotKey name.
func hotKeyName(parts [][]byte) (leases bool, ok bool) {
	for _, p := range parts {
		part := strings.TrimPrefix(string(p), "/")
		if v, found := strings.CutPrefix(part, "leases="); found {
			// The GOMAXPROCS suffix is its own part.
			b, err := strconv.ParseBool(v)
			return b, err == nil
		}
	}
	return false, false
}

// middlewareName returns the mw= value of a BenchmarkMiddleware name's
// parts, its other key=value parts joined by "/" ("keys=1k/outcome=allowed"),
// and its GOMAXPROCS (1 without a suffix, as go test prints it); ok is
// false without an mw= part or with a suffix that is not a number.
func middlewareName(parts [][]byte) (mw, run string, procs int, ok bool) {
	procs = 1
	var rest []string
	for _, p := range parts {
		part := string(p)
		if n, found := strings.CutPrefix(part, "-"); found {
			var err error
			if procs, err = strconv.Atoi(n); err != nil {
				return "", "", 0, false
			}
			continue
		}
		part = strings.TrimPrefix(part, "/")
		if v, found := strings.CutPrefix(part, "mw="); found {
			mw = v
		} else {
			rest = append(rest, part)
		}
	}
	return mw, strings.Join(rest, "/"), procs, mw != ""
}

// mwCell is the Cell of BenchmarkMiddleware for mw on run (the name's
// other parts) at procs in unit.
func mwCell(mw, run string, procs int, unit string) Cell {
	return Cell{Bench: benchMW, Subject: mw, Workload: run, Procs: procs, Unit: unit}
}

// hotKeyCell is the Cell of BenchmarkHotKey with leases on or off, in
// unit.
func hotKeyCell(leases bool, unit string) Cell {
	return Cell{Bench: benchHotKey, Subject: fmt.Sprintf("leases=%v", leases), Unit: unit}
}

// redisCell is the Cell of BenchmarkRedis for op at clients in unit.
func redisCell(op string, clients int, unit string) Cell {
	return Cell{Bench: benchRedis, Subject: op, Clients: clients, Unit: unit}
}

// Fact returns the machine fact named key, or "".
func (s *Set) Fact(key string) string {
	for _, f := range s.Machine {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// Cores returns the machine's CPU count from machine.txt, or 0 if unknown.
func (s *Set) Cores() int {
	n, _ := strconv.Atoi(s.Fact("cores"))
	return n
}

// Oversubscribed reports whether a run at procs had more goroutines
// running than the machine has CPUs.
func (s *Set) Oversubscribed(procs int) bool {
	c := s.Cores()
	return c > 0 && procs > c
}

// Sample returns the sample of a cell, or nil if it was not measured.
func (s *Set) Sample(c Cell) *benchmath.Sample { return s.samples[c] }

// Summary returns the median of a cell and its 95% confidence interval,
// and false if the cell was not measured.
func (s *Set) Summary(c Cell) (benchmath.Summary, bool) {
	smp := s.samples[c]
	if smp == nil {
		return benchmath.Summary{}, false
	}
	return benchmath.AssumeNothing.Summary(smp, 0.95), true
}

// Median returns the median of a cell, and false if it was not measured.
func (s *Set) Median(c Cell) (float64, bool) {
	sum, ok := s.Summary(c)
	return sum.Center, ok
}

// allow is the Cell of BenchmarkAllow for subject on wl at procs in unit.
func allow(subject, wl string, procs int, unit string) Cell {
	return Cell{Bench: benchAllow, Subject: subject, Workload: wl, Procs: procs, Unit: unit}
}

// stores returns the subjects that are stores, not baselines.
func (s *Set) stores() []string {
	var out []string
	for _, subj := range s.Subjects {
		if subj != floor && subj != xrate {
			out = append(out, subj)
		}
	}
	return out
}

// memoryProcs returns the GOMAXPROCS whose BenchmarkMemory sample for
// subject is largest (the higher on a tie), or 0 if it did not run. The
// benchmark runs at one GOMAXPROCS only, but the testing package's first
// call of a sub-benchmark, which can stand as the result of the first -cpu
// value, may run at another.
func (s *Set) memoryProcs(subject string) int {
	best, n := 0, 0
	for c, v := range s.values {
		if c.Bench == benchMemory && c.Subject == subject && c.Unit == unitKey &&
			(len(v) > n || len(v) == n && c.Procs > best) {
			best, n = c.Procs, len(v)
		}
	}
	return best
}

// printed returns v's unit and value as the benchmark printed them,
// undoing benchfmt's tidying (ns/op, not sec/op).
func printed(v benchfmt.Value) (unit string, val float64) {
	if v.OrigUnit != "" {
		return v.OrigUnit, v.OrigValue
	}
	return v.Unit, v.Value
}
