package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"
)

// Verdict is the outcome of checking one performance target against a
// result set.
type Verdict struct {
	// Target states the target in words.
	Target string
	// Met is true when every figure the target constrains is within it.
	Met bool
	// Measured is true when the set holds every figure the target needs;
	// a target not measured is not met.
	Measured bool
	// Figures lists the numbers checked, each marked with whether it is
	// within the target.
	Figures []string
}

// Target thresholds, from the issue that set them.
const (
	atomicFloorMax    = 1.25 // atomic's ns/op ÷ floor's, at most
	mutexFloorMax     = 1.6  // mutex's ns/op ÷ floor's, at most
	stripedFloorMax   = 1.3  // striped's ns/op ÷ floor's on hotWorkloads (one hash per call), at most
	fastVsXrate       = 2.0  // xrate's ns/op ÷ a store's, at least, on small key sets
	largeVsXrate      = 1.3  // the same on a million keys
	leanestBytesMax   = 64.0 // B/key of the leanest store, at most
	everyBytesMax     = 100.0
	leanestGCMillisMx = 10.0
	exactBytesMax     = 48.0 // B/key of atomic and striped with exact (string) keys, at most
	exactGCMillisMax  = 5.0  // their forced GC with a million keys, at most
	redisEmptyOne     = 1.3  // redisbucket Allow's p50 ÷ an empty EVALSHA's with one client, at most
	redisEmptyMany    = 1.6  // the same with more clients (50 in BenchmarkRedis), at most
	redisAllocsMax    = 8    // redisbucket Allow's allocs/op, at most
	leaseSpeedupMin   = 5.0  // BenchmarkHotKey's allows/s with leases ÷ without, at least
	twoWindowsMax     = 1.6  // a store under two windows ÷ the same under one (ns/op), at most
	threeTiersMax     = 1.1  // a store with three tiers ÷ the same with one limit (ns/op), at most
	waitMax           = 1.1  // Wait on a key with tokens ÷ AllowN (ns/op), at most
	reserveHotMax     = 1.0  // Reserve on hotkey at -cpu reserveHotProcs ÷ AllowN (ns/op), at most
)

// The one cell the Reserve target speaks of: a hot key at -cpu 2.
const (
	reserveHotWorkload = "hotkey"
	reserveHotProcs    = 2
)

// The policy rows the targets speak of (policy= values, see package bench).
const (
	twoWindows = "2windows"
	threeTiers = "3tiers"
)

// policyTarget is the most a policy row's ns/op may be, as a multiple of
// its one-window subject's, and the workloads the target covers.
type policyTarget struct {
	max       float64
	workloads []string
}

// policyTargets holds the target of each policy the issue set one for.
var policyTargets = map[string]policyTarget{
	twoWindows: {twoWindowsMax, []string{"hotkey", "uniform-1k"}},
	threeTiers: {threeTiersMax, []string{"uniform-1k"}},
}

// Workload groups the targets speak of.
var (
	smallWorkloads = []string{"hotkey", "hotkey-deny", "uniform-1k"}
	hotWorkloads   = []string{"hotkey", "uniform-1k"}
	largeWorkloads = []string{"uniform-1M", "zipf-1M"}
)

// Targets checks every performance target against s, in the order the
// issue states them; httplimit's against other middlewares only where s
// has BenchmarkMiddleware results, which the reports of earlier runs do
// not. Core counts where GOMAXPROCS exceeds the machine's
// CPUs are left out of the "every core count" checks.
func Targets(s *Set) []Verdict {
	vs := []Verdict{
		s.zeroAllocs(),
		s.floorRatio("atomic", atomicFloorMax, smallWorkloads),
		s.floorRatio("mutex", mutexFloorMax, smallWorkloads),
		s.floorRatio("striped", stripedFloorMax, hotWorkloads),
		s.xrateSpeedup(smallWorkloads, fastVsXrate),
		s.xrateSpeedup(largeWorkloads, largeVsXrate),
		s.memory(),
		s.noRetryStorm(),
		s.redisOverhead(),
		s.policyOverhead(twoWindows, "two windows", "one window"),
		s.policyOverhead(threeTiers, "three tiers (WithPolicyFunc)", "one limit"),
		s.waitOverhead(),
		s.reserveHotkey(),
		s.leaseSpeedup(),
		s.exactKeys(),
	}
	if len(s.Middlewares) > 0 {
		vs = append(vs, s.middlewareTarget())
	}
	return vs
}

// check collects a verdict's figures.
type check struct{ v Verdict }

func newCheck(target string) *check {
	return &check{Verdict{Target: target, Met: true, Measured: true}}
}

// add records one figure and whether it is within the target.
func (c *check) add(ok bool, format string, args ...any) {
	mark := "✓"
	if !ok {
		mark = "✗"
		c.v.Met = false
	}
	c.v.Figures = append(c.v.Figures, mark+" "+fmt.Sprintf(format, args...))
}

// missing records a figure the set does not hold.
func (c *check) missing(what string) {
	c.v.Met, c.v.Measured = false, false
	c.v.Figures = append(c.v.Figures, "? "+what+": not measured")
}

func (c *check) done() Verdict {
	if len(c.v.Figures) == 0 {
		c.missing("no figures")
	}
	return c.v
}

// fitProcs returns the core counts measured that do not oversubscribe
// the machine.
func (s *Set) fitProcs() []int {
	var out []int
	for _, p := range s.Procs {
		if !s.Oversubscribed(p) {
			out = append(out, p)
		}
	}
	return out
}

// zeroAllocs: every store, 0 allocs/op on every workload but churn.
func (s *Set) zeroAllocs() Verdict {
	c := newCheck("Every store: 0 allocs/op on every workload but churn (median, at every core count)")
	for _, st := range s.stores() {
		if !s.allowMeasured(st) {
			c.missing(st + ": no BenchmarkAllow rows (measured by BenchmarkMemory only)")
			continue
		}
		worst, where := 0.0, ""
		for _, wl := range s.Workloads {
			if wl == churn {
				continue
			}
			for _, p := range s.Procs {
				m, ok := s.Median(allow(st, wl, p, unitAllocs))
				if !ok {
					c.missing(fmt.Sprintf("%s %s -cpu %d", st, wl, p))
					continue
				}
				if m > worst || where == "" {
					worst, where = max(worst, m), fmt.Sprintf("%s -cpu %d", wl, p)
				}
			}
		}
		c.add(worst == 0, "%s: at most %g allocs/op (worst: %s)", st, worst, where)
	}
	// A policy or op row runs on a few workloads only: those it has.
	for _, row := range slices.Concat(s.PolicyRows, s.OpRows) {
		worst, where := 0.0, ""
		for _, wl := range s.Workloads {
			for _, p := range s.Procs {
				if m, ok := s.Median(allow(row, wl, p, unitAllocs)); ok && (m > worst || where == "") {
					worst, where = max(worst, m), fmt.Sprintf("%s -cpu %d", wl, p)
				}
			}
		}
		if where != "" {
			c.add(worst == 0, "%s: at most %g allocs/op (worst: %s)", row, worst, where)
		}
	}
	return c.done()
}

// ratio returns the ratio of the medians of two cells, and false if
// either is missing.
func (s *Set) ratio(num, den Cell) (float64, bool) {
	n, ok1 := s.Median(num)
	d, ok2 := s.Median(den)
	if !ok1 || !ok2 || d == 0 {
		return 0, false
	}
	return n / d, true
}

// floorRatio: store ≤ limit × floor on the workloads wls at -cpu 1 and 2.
// The floor is bench's store=floor, which the driver calls through the
// same interface as the store, so that the call is on both sides of the
// ratio; each figure adds the store's ratio to BenchmarkLeanFloor (the
// three operations inline, with no call) where the set has it.
func (s *Set) floorRatio(store string, limit float64, wls []string) Verdict {
	c := newCheck(fmt.Sprintf("%s ≤ %g× floor (ns/op, the floor called through the driver as the store is; where BenchmarkLeanFloor ran, the ratio to it in brackets) on %s at -cpu 1 and 2",
		store, limit, strings.Join(wls, ", ")))
	for _, wl := range wls {
		for _, p := range []int{1, 2} {
			r, ok := s.ratio(allow(store, wl, p, unitNs), allow(floor, wl, p, unitNs))
			if !ok {
				c.missing(fmt.Sprintf("%s -cpu %d", wl, p))
				continue
			}
			fig := fmt.Sprintf("%s -cpu %d: %.2f×", wl, p, r)
			if l, ok := s.ratio(allow(store, wl, p, unitNs), leanCell(wl, p)); ok {
				fig += fmt.Sprintf(" (%.2f× the lean floor)", l)
			}
			c.add(r <= limit, "%s", fig)
		}
	}
	return c.done()
}

// xrateSpeedup: every store at least speedup× faster than xrate on wls, at
// every core count that fits the machine.
func (s *Set) xrateSpeedup(wls []string, speedup float64) Verdict {
	c := newCheck(fmt.Sprintf("Every store ≥ %g× faster than xrate on %s (every core count up to the CPUs)",
		speedup, strings.Join(wls, ", ")))
	if !slices.ContainsFunc(wls, func(wl string) bool { return slices.Contains(s.Workloads, wl) }) {
		c.missing(strings.Join(wls, ", ") + ": none in these results" + s.keysNote())
		return c.done()
	}
	for _, st := range s.stores() {
		if !s.allowMeasured(st) {
			c.missing(st + ": no BenchmarkAllow rows (measured by BenchmarkMemory only)")
			continue
		}
		worst, where, measured := 0.0, "", false
		for _, wl := range wls {
			for _, p := range s.fitProcs() {
				r, ok := s.ratio(allow(xrate, wl, p, unitNs), allow(st, wl, p, unitNs))
				if !ok {
					c.missing(fmt.Sprintf("%s %s -cpu %d", st, wl, p))
					continue
				}
				if !measured || r < worst {
					worst, where, measured = r, fmt.Sprintf("%s -cpu %d", wl, p), true
				}
			}
		}
		if measured {
			c.add(worst >= speedup, "%s: %s at worst (on %s)", st, speedThan(worst, "xrate"), where)
		}
	}
	return c.done()
}

// keysNote is " (these results have 100k keys in their large
// workloads)" where the set's large workloads have fewer than a million
// keys, or "".
func (s *Set) keysNote() string {
	if n := s.largeKeys(); n > 0 && n < million {
		return fmt.Sprintf(" (these results have %s keys in their large workloads)", countName(n))
	}
	return ""
}

// exactKeys: atomic and striped, with exact (string) keys, hold a
// million 16-byte keys in at most 48 B/key, and a forced GC with them live
// takes at most 5 ms (issue 16: no heap object per key).
func (s *Set) exactKeys() Verdict {
	c := newCheck(fmt.Sprintf("Exact keys without a heap object each: atomic and striped ≤ %g B/key and a forced GC ≤ %g ms with 1M 16-byte keys", exactBytesMax, exactGCMillisMax))
	if n := s.memoryKeys(); n != million {
		c.missing(fmt.Sprintf("BenchmarkMemory with a million keys (these results inserted %s)", countName(n)))
		return c.done()
	}
	for _, st := range []string{"atomic", "striped"} {
		p := s.memoryProcs(st)
		b, ok1 := s.Median(Cell{Bench: benchMemory, Subject: st, Procs: p, Unit: unitKey})
		gc, ok2 := s.Median(Cell{Bench: benchMemory, Subject: st, Procs: p, Unit: unitGC})
		if !ok1 || !ok2 {
			c.missing(st + " B/key and gc-ns")
			continue
		}
		c.add(b <= exactBytesMax, "%s: %.1f B/key", st, b)
		c.add(gc/1e6 <= exactGCMillisMax, "%s: forced GC %.1f ms", st, gc/1e6)
	}
	return c.done()
}

// memory: the leanest store ≤ 64 B/key, every store ≤ 100 B/key, a forced
// GC with the leanest store's million keys ≤ 10ms.
func (s *Set) memory() Verdict {
	c := newCheck(fmt.Sprintf("Memory, 16-byte keys: leanest store ≤ %g B/key, every store ≤ %g B/key; forced GC with 1M keys live, leanest store ≤ %g ms",
		leanestBytesMax, everyBytesMax, leanestGCMillisMx))
	if n := s.memoryKeys(); n != million {
		c.missing(fmt.Sprintf("BenchmarkMemory with a million keys (these results inserted %s)", countName(n)))
		return c.done()
	}
	leanest, leanBytes := "", 0.0
	for _, st := range s.stores() {
		p := s.memoryProcs(st)
		b, ok := s.Median(Cell{Bench: benchMemory, Subject: st, Procs: p, Unit: unitKey})
		if !ok {
			c.missing(st + " B/key")
			continue
		}
		c.add(b <= everyBytesMax, "%s: %.1f B/key", st, b)
		if leanest == "" || b < leanBytes {
			leanest, leanBytes = st, b
		}
	}
	if leanest == "" {
		return c.done()
	}
	c.add(leanBytes <= leanestBytesMax, "leanest, %s: %.1f B/key", leanest, leanBytes)
	gc, ok := s.Median(Cell{Bench: benchMemory, Subject: leanest, Procs: s.memoryProcs(leanest), Unit: unitGC})
	if !ok {
		c.missing(leanest + " gc-ns")
	} else {
		c.add(gc/1e6 <= leanestGCMillisMx, "leanest, %s: forced GC %.1f ms", leanest, gc/1e6)
	}
	return c.done()
}

// noRetryStorm: atomic on hotkey no slower per op at -cpu 2 than at -cpu 1.
func (s *Set) noRetryStorm() Verdict {
	c := newCheck("atomic on hotkey: no slower per op at -cpu 2 than at -cpu 1 (no CAS retry storm)")
	one, ok1 := s.Median(allow("atomic", "hotkey", 1, unitNs))
	two, ok2 := s.Median(allow("atomic", "hotkey", 2, unitNs))
	if !ok1 || !ok2 {
		c.missing("atomic hotkey at -cpu 1 and 2")
		return c.done()
	}
	c.add(two <= one, "-cpu 1: %.1f ns/op, -cpu 2: %.1f ns/op (%.2f×)", one, two, two/one)
	return c.done()
}

// redisOverhead: redisbucket's Allow within 1.3× of an EVALSHA of an empty
// script on the same connection with one client, and 1.6× with more, by
// median p50 per call, and at most 8 allocations per call, at every client
// count measured. With one client the p50s are op=paired's where the set
// has them (allow and the empty EVALSHA measured call by call, so that a
// machine whose speed moves between two runs does not decide it).
func (s *Set) redisOverhead() Verdict {
	c := newCheck(fmt.Sprintf("redisbucket Allow within %g× of an empty EVALSHA with one client and %g× with more (p50), at most %d allocs/op", redisEmptyOne, redisEmptyMany, redisAllocsMax))
	if len(s.RedisClients) == 0 {
		c.missing("BenchmarkRedis (no redis-server on PATH?)")
		return c.done()
	}
	for _, n := range s.RedisClients {
		a, ok1 := s.Median(redisCell(redisAllow, n, unitP50))
		e, ok2 := s.Median(redisCell(redisEmpty, n, unitP50))
		how := ""
		if pa, pe, ok := s.paired(); ok && n == 1 {
			// One client's calls do not wait for each other: measured
			// call by call, they differ only by what they cost.
			a, e, ok1, ok2, how = pa, pe, true, true, ", call by call"
		}
		if !ok1 || !ok2 || e == 0 {
			c.missing(fmt.Sprintf("clients=%d p50", n))
			continue
		}
		most := redisEmptyMany
		if n == 1 {
			most = redisEmptyOne
		}
		c.add(a/e <= most, "clients=%d%s: %.1f µs vs %.1f µs (%.2f×)", n, how, a/1e3, e/1e3, a/e)
		if m, ok := s.Median(redisCell(redisAllow, n, unitAllocs)); ok {
			c.add(m <= redisAllocsMax, "clients=%d: %g allocs/op", n, m)
		}
	}
	return c.done()
}

// paired returns op=paired's medians of allow's p50 and of the empty
// EVALSHA's, measured call by call with one client, if the set has them.
func (s *Set) paired() (allow, empty float64, ok bool) {
	a, ok1 := s.Median(redisCell(redisPaired, 1, unitP50))
	e, ok2 := s.Median(redisCell(redisPaired, 1, unitEmptyP50))
	return a, e, ok1 && ok2 && e > 0
}

// leaseSpeedup: on one hot key, nodes × goroutines of redisbucket reach
// at least 5× the allows per second with leases (WithLeases) that they
// reach without (BenchmarkHotKey), medians of one run.
func (s *Set) leaseSpeedup() Verdict {
	c := newCheck(fmt.Sprintf("redisbucket with leases on one hot key at least %g× the allows/s without", leaseSpeedupMin))
	on, ok1 := s.Median(hotKeyCell(true, unitAllows))
	off, ok2 := s.Median(hotKeyCell(false, unitAllows))
	if !ok1 || !ok2 || off == 0 {
		c.missing("BenchmarkHotKey (no redis-server on PATH?)")
		return c.done()
	}
	c.add(on/off >= leaseSpeedupMin, "%.0f allows/s with leases, %.0f without (%.2f×)", on, off, on/off)
	return c.done()
}

// MedianRatio is the ratio of two cells' median ns/op, a row's over its
// baseline's, both measured in one run.
type MedianRatio struct {
	// Ratio is the ratio of the medians; Lo and Hi bound it by the ratios
	// of the bounds of the two medians' 95% intervals (Lo = row's low ÷
	// base's high), an interval that holds the ratio of the true medians
	// with at least 90% confidence; ±Inf where a sample is too small for
	// an interval.
	Ratio, Lo, Hi float64
	// Test is the Mann-Whitney U test of the two samples.
	Test benchmath.Comparison
}

// medianRatio returns the ratio of num's median to den's, and false if
// either was not measured.
func (s *Set) medianRatio(num, den Cell) (MedianRatio, bool) {
	n, ok1 := s.Summary(num)
	d, ok2 := s.Summary(den)
	if !ok1 || !ok2 || d.Center == 0 {
		return MedianRatio{}, false
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if !math.IsInf(n.Lo, 0) && !math.IsInf(d.Hi, 0) && d.Hi > 0 {
		lo = n.Lo / d.Hi
	}
	if !math.IsInf(n.Hi, 0) && !math.IsInf(d.Lo, 0) && d.Lo > 0 {
		hi = n.Hi / d.Lo
	}
	return MedianRatio{
		Ratio: n.Center / d.Center, Lo: lo, Hi: hi,
		Test: compare(s.Sample(den), s.Sample(num)),
	}, true
}

// PolicyRatio is a policy row's ns/op against its one-window subject's on
// one workload at one core count, both measured in one run.
type PolicyRatio struct {
	Row, Base, Policy, Workload string
	Procs                       int
	MedianRatio
}

// PolicyRatios returns the ratio of every policy row to its one-window
// subject on each workload and core count where both were measured, in
// the order of PolicyRows, Workloads and Procs.
func (s *Set) PolicyRatios() []PolicyRatio {
	var out []PolicyRatio
	for _, row := range s.PolicyRows {
		base, policy, _ := policyOf(row)
		for _, wl := range s.Workloads {
			for _, p := range s.Procs {
				r, ok := s.medianRatio(allow(row, wl, p, unitNs), allow(base, wl, p, unitNs))
				if !ok {
					continue
				}
				out = append(out, PolicyRatio{Row: row, Base: base, Policy: policy, Workload: wl, Procs: p, MedianRatio: r})
			}
		}
	}
	return out
}

// String is "1.32× [1.20–1.45×]", or "1.32× [interval: too few runs]".
func (r MedianRatio) String() string {
	if math.IsInf(r.Lo, 0) || math.IsInf(r.Hi, 0) {
		return fmt.Sprintf("%.2f× [interval: too few runs]", r.Ratio)
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f×]", r.Ratio, r.Lo, r.Hi)
}

// policyOverhead: every store's policy row at most policyTargets[policy].max
// times its one-window subject (ns/op) on the target's workloads, at every
// core count up to the CPUs.
func (s *Set) policyOverhead(policy, what, base string) Verdict {
	t := policyTargets[policy]
	c := newCheck(fmt.Sprintf("%s ≤ %g× %s (ns/op, every store, policy=%s ÷ its one-window row) on %s (every core count up to the CPUs); in brackets, bounds from the two medians' 95%% intervals",
		what, t.max, base, policy, strings.Join(t.workloads, ", ")))
	fit := s.fitProcs()
	for _, r := range s.PolicyRatios() {
		if r.Policy != policy || !slices.Contains(t.workloads, r.Workload) || !slices.Contains(fit, r.Procs) {
			continue
		}
		note := ""
		switch {
		case r.Ratio <= t.max && r.Hi > t.max:
			note = "; the interval reaches past the target"
		case r.Ratio > t.max && r.Test.P >= r.Test.Alpha:
			note = fmt.Sprintf("; no significant difference from the one-window row (%s)", r.Test)
		}
		c.add(r.Ratio <= t.max, "%s %s -cpu %d: %s%s", r.Base, r.Workload, r.Procs, r, note)
	}
	if len(c.v.Figures) == 0 {
		c.missing(fmt.Sprintf("policy=%s rows and their one-window rows on %s", policy, strings.Join(t.workloads, ", ")))
	}
	return c.done()
}

// WaitRatio is a store's op=wait or op=reserve row (Wait or Reserve,
// needing no wait) against its op=allown row (AllowN) on one workload at
// one core count, both measured in one run.
type WaitRatio struct {
	// Row is the op row ("atomic/op=wait"), Base its op=allown row,
	// Store the store ("atomic") and Op the op ("wait" or "reserve").
	Row, Base, Store, Op, Workload string
	Procs                          int
	MedianRatio
}

// WaitRatios returns the ratio of every op=wait and op=reserve row to its
// store's op=allown row on each workload and core count where both were
// measured, in the order of OpRows, Workloads and Procs.
func (s *Set) WaitRatios() []WaitRatio {
	var out []WaitRatio
	for _, row := range s.OpRows {
		store, op, _ := opOf(row)
		if op == opAllowN {
			continue
		}
		base := withOp(row, opAllowN)
		for _, wl := range s.Workloads {
			for _, p := range s.Procs {
				r, ok := s.medianRatio(allow(row, wl, p, unitNs), allow(base, wl, p, unitNs))
				if !ok {
					continue
				}
				out = append(out, WaitRatio{Row: row, Base: base, Store: store, Op: op, Workload: wl, Procs: p, MedianRatio: r})
			}
		}
	}
	return out
}

// waitTarget returns the target a wait ratio is checked against, and
// false if none applies to it: op=wait on every workload and core count,
// op=reserve on reserveHotWorkload at -cpu reserveHotProcs.
func waitTarget(r WaitRatio) (float64, bool) {
	switch {
	case r.Op == opWait:
		return waitMax, true
	case r.Op == opReserve && r.Workload == reserveHotWorkload && r.Procs == reserveHotProcs:
		return reserveHotMax, true
	}
	return 0, false
}

// waitNote is what a wait ratio's figure adds to the ratio: where the
// interval reaches past max though the medians meet it, and where the
// medians miss it though the test finds no significant difference.
func waitNote(r WaitRatio, max float64) string {
	switch {
	case r.Ratio <= max && r.Hi > max:
		return "; the interval reaches past the target"
	case r.Ratio > max && r.Test.P >= r.Test.Alpha:
		return fmt.Sprintf("; no significant difference from AllowN (%s)", r.Test)
	}
	return ""
}

// waitOverhead: every store's Wait, needing no wait, at most waitMax
// times its AllowN (ns/op), on every workload measured, at every core
// count up to the CPUs.
func (s *Set) waitOverhead() Verdict {
	c := newCheck(fmt.Sprintf("Wait on a key that has tokens ≤ %.2f× AllowN (ns/op, every store, op=wait ÷ op=allown) on every workload measured (every core count up to the CPUs); in brackets, bounds from the two medians' 95%% intervals", waitMax))
	fit := s.fitProcs()
	for _, r := range s.WaitRatios() {
		if r.Op == opWait && slices.Contains(fit, r.Procs) {
			c.add(r.Ratio <= waitMax, "%s %s -cpu %d: %s%s", r.Store, r.Workload, r.Procs, r, waitNote(r, waitMax))
		}
	}
	// An op=wait cell without its baseline has no ratio: not a target met.
	for _, row := range s.OpRows {
		if _, op, _ := opOf(row); op != opWait {
			continue
		}
		base := withOp(row, opAllowN)
		for _, wl := range s.Workloads {
			for _, p := range fit {
				_, okRow := s.Median(allow(row, wl, p, unitNs))
				_, okBase := s.Median(allow(base, wl, p, unitNs))
				if okRow && !okBase {
					c.missing(fmt.Sprintf("%s %s -cpu %d", base, wl, p))
				}
			}
		}
	}
	if len(c.v.Figures) == 0 {
		c.missing("op=wait rows and their op=allown rows")
	}
	return c.done()
}

// reserveHotkey: every store's Reserve, needing no wait, on a hot key at
// -cpu 2, no slower than its AllowN (ns/op). -cpu 2 is the target's own
// core count: it counts even where it oversubscribes the machine.
func (s *Set) reserveHotkey() Verdict {
	c := newCheck(fmt.Sprintf("Reserve on %s at -cpu %d ≤ %.2f× AllowN (ns/op, every store, op=reserve ÷ op=allown); in brackets, bounds from the two medians' 95%% intervals",
		reserveHotWorkload, reserveHotProcs, reserveHotMax))
	for _, row := range s.OpRows {
		store, op, _ := opOf(row)
		if op != opReserve {
			continue
		}
		base := withOp(row, opAllowN)
		m, ok := s.medianRatio(allow(row, reserveHotWorkload, reserveHotProcs, unitNs), allow(base, reserveHotWorkload, reserveHotProcs, unitNs))
		if !ok {
			c.missing(fmt.Sprintf("%s or %s on %s at -cpu %d", row, base, reserveHotWorkload, reserveHotProcs))
			continue
		}
		r := WaitRatio{Row: row, Base: base, Store: store, Op: op, Workload: reserveHotWorkload, Procs: reserveHotProcs, MedianRatio: m}
		c.add(r.Ratio <= reserveHotMax, "%s: %s%s", store, r, waitNote(r, reserveHotMax))
	}
	if len(c.v.Figures) == 0 {
		c.missing(fmt.Sprintf("op=reserve rows and their op=allown rows on %s at -cpu %d", reserveHotWorkload, reserveHotProcs))
	}
	return c.done()
}
