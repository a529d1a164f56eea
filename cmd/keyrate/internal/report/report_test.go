package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lines returns raw benchmark lines for one cell: n runs of ns/op values
// ns, ns+1, ... with allocs allocations.
func lines(name string, procs, n int, ns float64, allocs int) string {
	suffix := ""
	if procs != 1 {
		suffix = fmt.Sprintf("-%d", procs)
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "BenchmarkAllow/%s%s \t1000\t%g ns/op\t1.000 allowed/op\t0 B/op\t%d allocs/op\n",
			name, suffix, ns+float64(i), allocs)
	}
	return b.String()
}

// memLines returns BenchmarkMemory lines for store.
func memLines(store string, n int, perKey, gcNs float64) string {
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "BenchmarkMemory/store=%s-2 \t1\t1000 ns/op\t%g B/key\t%g gc-ns\n", store, perKey, gcNs)
	}
	return b.String()
}

// redisLines returns n BenchmarkRedis lines for op at clients, as
// redisbucket/bench_test.go prints them (GOMAXPROCS 2, pkg line first).
func redisLines(op string, clients, n int, ns, p50, p99 float64) string {
	var b strings.Builder
	b.WriteString("pkg: github.com/keyrate/keyrate/redisbucket\n")
	for range n {
		fmt.Fprintf(&b, "BenchmarkRedis/op=%s/clients=%d-2 \t1000\t%g ns/op\t%g p50-ns\t%g p99-ns\t1089 B/op\t8 allocs/op\n",
			op, clients, ns, p50, p99)
	}
	return b.String()
}

// pairedLines returns n BenchmarkRedis op=paired lines (one client), as
// redisbucket/bench_test.go prints them: allow's p50, then the floor
// script's and the empty EVALSHA's measured call by call beside it.
func pairedLines(n int, allow, floor, empty float64) string {
	var b strings.Builder
	b.WriteString("pkg: github.com/keyrate/keyrate/redisbucket\n")
	for range n {
		fmt.Fprintf(&b, "BenchmarkRedis/op=paired/clients=1-2 \t1000\t%g ns/op\t%g empty-p50-ns\t%g floor-p50-ns\t%g p50-ns\t%g p99-ns\t1200 B/op\t30 allocs/op\n",
			allow+floor+empty, empty, floor, allow, 3*allow)
	}
	return b.String()
}

// hotKeyLines returns n BenchmarkHotKey lines with leases on or off at
// allows allows/s, as redisbucket/lease_test.go prints them.
func hotKeyLines(leases bool, n int, allows float64) string {
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "BenchmarkHotKey/op=allow/leases=%v-2 \t10000\t%g ns/op\t%g allows/s\t0.0100 calls/op\t300 B/op\t3 allocs/op\n",
			leases, 1e9/allows, allows)
	}
	return b.String()
}

// assertHas fails t for each of wants that md, the report named what,
// lacks.
func assertHas(t *testing.T, md, what string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("%s lacks %q", what, want)
		}
	}
}

// fixture builds a result set in which every target is met except the
// ones named in miss: "atomic-floor" (atomic at 1.5× floor on hotkey at
// -cpu 2), "striped-floor" (striped at 1.38× floor on hotkey at -cpu 2,
// within the older 1.6× but not its one-hash 1.3×), "allocs" (striped
// allocates on uniform-1k), "storm" (atomic
// slower at -cpu 2 than at -cpu 1), "redis" (Allow's p50 1.5× an empty
// EVALSHA's at 50 clients), "2windows" (mutex under two windows 1.8× its
// one-window row on hotkey at -cpu 2) and "3tiers" (striped with three
// tiers 1.2× its one-limit row at -cpu 1), "wait" (atomic's Wait 1.3× its
// AllowN on uniform-1k at -cpu 2) and "reserve" (striped's Reserve 1.2× its
// AllowN on hotkey at -cpu 2); "reserve-tie" puts mutex's Reserve on hotkey
// at -cpu 2 a hair above its AllowN (1.01×, not a significant
// difference); "leases" puts BenchmarkHotKey's leases at 4.5× the
// allows/s without; "paired" adds BenchmarkRedis's op=paired, allow 1.5×
// the empty EVALSHA call by call with one client; "no-redis" leaves BenchmarkRedis and BenchmarkHotKey out, "no-policies" the
// policy rows, "no-waiting" the wait rows.
func fixture(t *testing.T, miss ...string) *Set {
	t.Helper()
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\n")
	ns := map[string]float64{"floor": 100, "atomic": 110, "mutex": 150, "striped": 125, "xrate": 400}
	for _, st := range []string{"mutex", "striped", "atomic", "floor", "xrate"} {
		for _, wl := range []string{"hotkey", "hotkey-deny", "uniform-1k", "uniform-1M", "zipf-1M", "churn"} {
			for _, p := range []int{1, 2, 4} {
				v, allocs := ns[st], 0
				if wl == "churn" {
					allocs = 2
				}
				if st == "atomic" && wl == "hotkey" && p == 2 && slices.Contains(miss, "atomic-floor") {
					v = 150
				}
				if st == "striped" && wl == "hotkey" && p == 2 && slices.Contains(miss, "striped-floor") {
					v = 140
				}
				if st == "atomic" && wl == "hotkey" && p == 1 && slices.Contains(miss, "storm") {
					v = 90
				}
				if st == "striped" && wl == "uniform-1k" && slices.Contains(miss, "allocs") {
					allocs = 1
				}
				b.WriteString(lines("store="+st+"/wl="+wl, p, 10, v, allocs))
			}
		}
	}
	if !slices.Contains(miss, "no-policies") {
		for _, st := range []string{"mutex", "striped", "atomic"} {
			for _, p := range []int{1, 2, 4} {
				for _, wl := range []string{"hotkey", "uniform-1k"} {
					v := ns[st] * 1.3
					if st == "mutex" && wl == "hotkey" && p == 2 && slices.Contains(miss, "2windows") {
						v = ns[st] * 1.8
					}
					b.WriteString(lines("store="+st+"/policy=2windows/wl="+wl, p, 10, v, 0))
				}
				v := ns[st] * 1.05
				if st == "striped" && p == 1 && slices.Contains(miss, "3tiers") {
					v = ns[st] * 1.2
				}
				b.WriteString(lines("store="+st+"/policy=3tiers/wl=uniform-1k", p, 10, v, 0))
			}
		}
	}
	if !slices.Contains(miss, "no-waiting") {
		for _, st := range []string{"mutex", "striped", "atomic"} {
			for _, wl := range []string{"hotkey", "uniform-1k"} {
				for _, p := range []int{1, 2, 4} {
					allowN := ns[st] * 1.1
					wait, reserve := allowN*1.05, allowN*0.95
					if st == "atomic" && wl == "uniform-1k" && p == 2 && slices.Contains(miss, "wait") {
						wait = allowN * 1.3
					}
					if st == "striped" && wl == "hotkey" && p == 2 && slices.Contains(miss, "reserve") {
						reserve = allowN * 1.2
					}
					if st == "mutex" && wl == "hotkey" && p == 2 && slices.Contains(miss, "reserve-tie") {
						reserve = allowN + 1
					}
					b.WriteString(lines("store="+st+"/op=allown/wl="+wl, p, 10, allowN, 0))
					b.WriteString(lines("store="+st+"/op=wait/wl="+wl, p, 10, wait, 0))
					b.WriteString(lines("store="+st+"/op=reserve/wl="+wl, p, 10, reserve, 0))
				}
			}
		}
	}
	b.WriteString(memLines("mutex", 10, 90, 30e6))
	b.WriteString(memLines("striped", 10, 40, 3e6))
	b.WriteString(memLines("atomic", 10, 45, 4e6))
	if !slices.Contains(miss, "no-redis") {
		for _, clients := range []int{1, 8, 50} {
			allowP50 := 110e3
			if clients == 50 && slices.Contains(miss, "redis") {
				allowP50 = 170e3
			}
			b.WriteString(redisLines("allow", clients, 10, 50e3, allowP50, 400e3))
			b.WriteString(redisLines("evalsha-empty", clients, 10, 40e3, 100e3, 300e3))
			b.WriteString(redisLines("allow-pipelined", clients, 10, 30e3, 120e3, 350e3))
		}
		leased := 300e3
		if slices.Contains(miss, "leases") {
			leased = 90e3
		}
		if slices.Contains(miss, "paired") {
			b.WriteString(pairedLines(10, 150e3, 130e3, 100e3))
		}
		b.WriteString(hotKeyLines(false, 10, 20e3))
		b.WriteString(hotKeyLines(true, 10, leased))
	}
	s, err := Read(strings.NewReader(b.String()), "fixture")
	if err != nil {
		t.Fatal(err)
	}
	s.Machine = []Fact{{"cores", "2"}}
	return s
}

func TestReadProjectsCells(t *testing.T) {
	in := "goos: linux\n" +
		lines("store=atomic/clock=coarse/wl=hotkey", 1, 3, 40, 0) +
		lines("store=atomic/wl=hotkey", 2, 3, 50, 0) +
		"BenchmarkOther-2 \t1\t5 ns/op\n" +
		"BenchmarkAllow/store=atomic/wl=hotkey-2 \t12\n" // cut short
	s, err := Read(strings.NewReader(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(s.Subjects, s.Workloads, s.Procs), "[atomic/clock=coarse atomic] [hotkey] [1 2]"; got != want {
		t.Errorf("subjects, workloads, procs = %s, want %s", got, want)
	}
	if m, ok := s.Median(allow("atomic/clock=coarse", "hotkey", 1, unitNs)); !ok || m != 41 {
		t.Errorf("median ns/op of coarse at -cpu 1 = %v, %v; want 41, true", m, ok)
	}
	if m, ok := s.Median(allow("atomic", "hotkey", 2, "allowed/op")); !ok || m != 1 {
		t.Errorf("median allowed/op = %v, %v; want 1, true", m, ok)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "in:9:") {
		t.Errorf("warnings = %q, want one for line 9", s.Warnings)
	}
}

func TestReadRejectsEmpty(t *testing.T) {
	if _, err := Read(strings.NewReader("goos: linux\n"), "empty"); err == nil || err.Error() != "empty: no BenchmarkAllow results" {
		t.Errorf("err = %v, want \"empty: no BenchmarkAllow results\"", err)
	}
}

func TestReadMachine(t *testing.T) {
	facts, err := ReadMachine(strings.NewReader("cpu: Xeon @ 2.50GHz\n\ncores: 2\ncommand: go test -run '^$'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(facts), "[{cpu Xeon @ 2.50GHz} {cores 2} {command go test -run '^$'}]"; got != want {
		t.Errorf("facts = %s, want %s", got, want)
	}
	if _, err := ReadMachine(strings.NewReader("no colon\n")); err == nil {
		t.Error("ReadMachine accepted a line without a colon")
	}
}

func TestTargetsAllMet(t *testing.T) {
	for _, v := range Targets(fixture(t)) {
		if !v.Met || !v.Measured {
			t.Errorf("%s: met %v, measured %v; figures %q", v.Target, v.Met, v.Measured, v.Figures)
		}
	}
}

func TestTargetsMissed(t *testing.T) {
	vs := Targets(fixture(t, "atomic-floor", "striped-floor", "allocs", "storm", "redis", "2windows", "3tiers", "wait", "reserve"))
	got := map[string][]string{}
	for _, v := range vs {
		if !v.Met {
			for _, f := range v.Figures {
				if strings.HasPrefix(f, "✗") {
					got[v.Target] = append(got[v.Target], f)
				}
			}
		}
	}
	want := map[string][]string{
		vs[0].Target:  {"✗ striped: at most 1 allocs/op (worst: uniform-1k -cpu 1)"},
		vs[1].Target:  {"✗ hotkey -cpu 2: 1.48×"},
		vs[3].Target:  {"✗ hotkey -cpu 2: 1.38×"},
		vs[7].Target:  {"✗ -cpu 1: 94.5 ns/op, -cpu 2: 154.5 ns/op (1.63×)"},
		vs[8].Target:  {"✗ clients=50: 170.0 µs vs 100.0 µs (1.70×)"},
		vs[9].Target:  {"✗ mutex hotkey -cpu 2: 1.78× [1.72–1.84×]"},
		vs[10].Target: {"✗ striped uniform-1k -cpu 1: 1.19× [1.14–1.25×]"},
		vs[11].Target: {"✗ atomic uniform-1k -cpu 2: 1.29× [1.23–1.35×]"},
		vs[12].Target: {"✗ striped: 1.19× [1.14–1.25×]"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("missed figures:\n got %q\nwant %q", got, want)
	}
}

func TestTargetsMemoryFigures(t *testing.T) {
	v := Targets(fixture(t))[6]
	want := []string{
		"✓ mutex: 90.0 B/key", "✓ striped: 40.0 B/key", "✓ atomic: 45.0 B/key",
		"✓ leanest, striped: 40.0 B/key", "✓ leanest, striped: forced GC 3.0 ms",
	}
	if fmt.Sprint(v.Figures) != fmt.Sprint(want) {
		t.Errorf("figures = %q, want %q", v.Figures, want)
	}
}

func TestTargetsNotMeasured(t *testing.T) {
	s, err := Read(strings.NewReader(lines("store=atomic/wl=hotkey", 1, 3, 40, 0)), "small")
	if err != nil {
		t.Fatal(err)
	}
	vs := Targets(s)
	if !vs[0].Met { // atomic's allocations are there
		t.Errorf("%s: not met; figures %q", vs[0].Target, vs[0].Figures)
	}
	for _, v := range vs[1:] {
		if v.Met || v.Measured {
			t.Errorf("%s: met %v, measured %v on a set without floor, xrate or memory", v.Target, v.Met, v.Measured)
		}
	}
}

func TestMarkdownSummaryAndOversubscription(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t))
	md := buf.String()
	assertHas(t, md, "report",
		"- **hotkey**: `atomic`, 114.5 ns/op, 3.53× faster than xrate, 1.10× floor's time; next is `striped`, 129.5 ns/op (p=0.000 n=10).",
		"Fastest at -cpu 2, by workload count: `atomic` on 6 of 6 workloads.",
		"Leanest in memory: `striped`, 40.0 B/key with a million 16-byte keys.",
		"In short: `atomic` where time per call matters most, `striped` where memory per key does.",
		"Checked by the generator on these results: 15 of 15 met.",
		"### -cpu 4 †",
		"† GOMAXPROCS above the machine's 2 CPUs: oversubscribed, goroutines share cores.",
		"| hotkey | 1.48× floor / 0.38× xrate | 1.24× floor / 0.32× xrate | 1.10× floor / 0.28× xrate |",
		"![throughput, wl=zipf-1M](throughput-zipf-1M.svg)",
	)
	if strings.Contains(md, "## Before and after") {
		t.Error("a one-set report has a before/after section")
	}
}

func TestReadRedis(t *testing.T) {
	s := fixture(t)
	if fmt.Sprint(s.RedisClients) != "[1 8 50]" {
		t.Errorf("RedisClients = %v, want [1 8 50]", s.RedisClients)
	}
	// BenchmarkRedis's ops are neither stores nor workloads, and its
	// GOMAXPROCS is no core count of BenchmarkAllow.
	for _, subj := range s.Subjects {
		if strings.Contains(subj, "allow") || strings.Contains(subj, "evalsha") {
			t.Errorf("Subjects %q hold a Redis op", s.Subjects)
		}
	}
	if fmt.Sprint(s.Workloads) != "[hotkey hotkey-deny uniform-1k uniform-1M zipf-1M churn]" || fmt.Sprint(s.Procs) != "[1 2 4]" {
		t.Errorf("Workloads %v, Procs %v: changed by Redis lines", s.Workloads, s.Procs)
	}
	for cell, want := range map[Cell]float64{
		redisCell("allow", 8, "ns/op"):           50e3,
		redisCell("allow", 8, "p50-ns"):          110e3,
		redisCell("evalsha-empty", 50, "p99-ns"): 300e3,
		redisCell("evalsha-empty", 1, "B/op"):    1089,
	} {
		if got, ok := s.Median(cell); !ok || got != want {
			t.Errorf("Median(%+v) = %g, %v; want %g", cell, got, ok, want)
		}
	}
	v := Targets(s)[8]
	want := []string{
		"✓ clients=1: 110.0 µs vs 100.0 µs (1.10×)",
		"✓ clients=1: 8 allocs/op",
		"✓ clients=8: 110.0 µs vs 100.0 µs (1.10×)",
		"✓ clients=8: 8 allocs/op",
		"✓ clients=50: 110.0 µs vs 100.0 µs (1.10×)",
		"✓ clients=50: 8 allocs/op",
	}
	if !v.Met || !v.Measured || fmt.Sprint(v.Figures) != fmt.Sprint(want) {
		t.Errorf("%s: met %v, measured %v, figures %q; want met, %q", v.Target, v.Met, v.Measured, v.Figures, want)
	}
	bad, err := Read(strings.NewReader(lines("store=atomic/wl=hotkey", 1, 1, 40, 0)+
		"BenchmarkRedis/op=allow-2 \t10\t1 ns/op\n"), "bad")
	if err != nil {
		t.Fatal(err)
	}
	if len(bad.Warnings) != 1 || len(bad.RedisClients) != 0 {
		t.Errorf("a Redis line without clients=: warnings %q, clients %v", bad.Warnings, bad.RedisClients)
	}
}

func TestMarkdownRedis(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t, "redis"))
	md := buf.String()
	assertHas(t, md, "report",
		"## Redis: the price of going distributed",
		"| 1 | 50000 | 20000 | 110.0 µs | 400.0 µs | 40000 | 25000 | 100.0 µs | 300.0 µs | 1.10× |",
		"| 50 | 50000 | 20000 | 170.0 µs | 400.0 µs | 40000 | 25000 | 100.0 µs | 300.0 µs | 1.70× |",
		"| redisbucket Allow within 1.3× of an empty EVALSHA with one client and 1.6× with more (p50), at most 8 allocs/op | **missed** | ✓ clients=1: 110.0 µs vs 100.0 µs (1.10×)<br>✓ clients=1: 8 allocs/op<br>✓ clients=8: 110.0 µs vs 100.0 µs (1.10×)<br>✓ clients=8: 8 allocs/op<br>✗ clients=50: 170.0 µs vs 100.0 µs (1.70×)<br>✓ clients=50: 8 allocs/op |",
		"Checked by the generator on these results: 14 of 15 met.",
		"- `allow-pipelined`: `AllowN` under `WithPipelining`",
		"| op | clients | ns/op | ops/s | p50 | p99 | allocs/op | p50 ÷ empty |",
		"| `allow-pipelined` | 50 | 30000 | 33333 | 120.0 µs | 350.0 µs | 8 | 1.20× |",
		"20000 allows/s. With `WithLeases(redisbucket.Lease{Size: 100, Life: 10 * time.Millisecond})` a node spends 100 tokens in one call and hands them out locally: 300000 allows/s, 15.00× (target: at least 5×).",
		"| redisbucket with leases on one hot key at least 5× the allows/s without | **met** | ✓ 300000 allows/s with leases, 20000 without (15.00×) |",
	)

	buf.Reset()
	Markdown(&buf, fixture(t, "leases"))
	assertHas(t, buf.String(), "report with leases at 4.5×", "| redisbucket with leases on one hot key at least 5× the allows/s without | **missed** | ✗ 90000 allows/s with leases, 20000 without (4.50×) |")

	buf.Reset()
	Markdown(&buf, fixture(t, "no-redis"))
	md = buf.String()
	assertHas(t, md, "report without Redis",
		"## Redis: the price of going distributed\n\nNot measured: these results hold no BenchmarkRedis",
		"| redisbucket Allow within 1.3× of an empty EVALSHA with one client and 1.6× with more (p50), at most 8 allocs/op | not measured | ? BenchmarkRedis (no redis-server on PATH?): not measured |",
		"| redisbucket with leases on one hot key at least 5× the allows/s without | not measured | ? BenchmarkHotKey (no redis-server on PATH?): not measured |",
		"Checked by the generator on these results: 13 of 15 met.",
	)
	if strings.Contains(md, "| clients |") {
		t.Error("a report without Redis results has a Redis table")
	}
}

// TestMarkdownRedisPaired checks that op=paired's call-by-call figures,
// where present, decide the one-client target and get a table of their
// own, and that the other client counts keep the separate runs' figures.
func TestMarkdownRedisPaired(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t, "paired"))
	md := buf.String()
	assertHas(t, md, "report with op=paired",
		"**Call by call** (`paired`)",
		"| call | p50 | p50 ÷ empty |",
		"| allow | 150.0 µs | 1.50× |",
		"| floor: TIME, GET and SET | 130.0 µs | 1.30× |",
		"| empty EVALSHA | 100.0 µs | 1× |",
		"| **missed** | ✗ clients=1, call by call: 150.0 µs vs 100.0 µs (1.50×)<br>✓ clients=1: 8 allocs/op<br>✓ clients=8: 110.0 µs vs 100.0 µs (1.10×)",
		"| 1 | 50000 | 20000 | 110.0 µs | 400.0 µs | 40000 | 25000 | 100.0 µs | 300.0 µs | 1.10× |",
	)
	if strings.Contains(md, "| `paired` |") {
		t.Error("op=paired is a row of the other calls' table too")
	}
}

func TestMarkdownDeltas(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t), fixture(t, "atomic-floor"))
	md := buf.String()
	assertHas(t, md, "report",
		"| `atomic` | hotkey | 2 | 114.5 | 154.5 | +34.93% | p=0.000 n=10 |",
		"| `atomic` | hotkey | 1 | 114.5 | 114.5 | ~ | p=1.000 n=10 |",
	)
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := Write(dir, fixture(t)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := "[README.md throughput-churn.svg throughput-hotkey-deny.svg throughput-hotkey.svg throughput-uniform-1M.svg throughput-uniform-1k.svg throughput-zipf-1M.svg]"
	if fmt.Sprint(names) != want {
		t.Errorf("files = %v, want %s", names, want)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "throughput-hotkey.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte(">xrate<")) {
		t.Errorf("throughput-hotkey.svg is not an SVG with an xrate line: %.200s", svg)
	}
	if err := Write(dir); err == nil {
		t.Error("Write with no sets succeeded")
	}
}

func TestReadPolicyRows(t *testing.T) {
	s := fixture(t)
	if got, want := fmt.Sprint(s.Subjects), "[mutex striped atomic floor xrate]"; got != want {
		t.Errorf("Subjects = %s, want %s (no policy rows)", got, want)
	}
	want := "[mutex/policy=2windows mutex/policy=3tiers striped/policy=2windows striped/policy=3tiers atomic/policy=2windows atomic/policy=3tiers]"
	if got := fmt.Sprint(s.PolicyRows); got != want {
		t.Errorf("PolicyRows = %s, want %s", got, want)
	}
	for subject, want := range map[string]string{
		"atomic/policy=2windows":              "atomic 2windows true",
		"atomic/clock=coarse/policy=3tiers":   "atomic/clock=coarse 3tiers true",
		"atomic/policy=3tiers/clock=coarse":   "atomic/clock=coarse 3tiers true",
		"atomic/clock=coarse":                 "  false",
		"striped/keys=hashed/policy=2windows": "striped/keys=hashed 2windows true",
	} {
		base, policy, ok := policyOf(subject)
		if got := fmt.Sprint(base, " ", policy, " ", ok); got != want {
			t.Errorf("policyOf(%q) = %s, want %s", subject, got, want)
		}
	}
}

func TestPolicyRatios(t *testing.T) {
	s := fixture(t, "2windows")
	rs := s.PolicyRatios()
	if len(rs) != 3*3*3 { // 3 stores × (2 + 1 workloads) × 3 core counts
		t.Fatalf("%d ratios, want 27", len(rs))
	}
	r := rs[1] // mutex 2windows hotkey -cpu 2
	if got, want := fmt.Sprint(r.Row, r.Base, r.Policy, r.Workload, r.Procs), "mutex/policy=2windowsmutex2windowshotkey2"; got != want {
		t.Errorf("rs[1] is %s, want %s", got, want)
	}
	if got, want := r.String(), "1.78× [1.72–1.84×]"; got != want {
		t.Errorf("rs[1] = %s, want %s", got, want)
	}
	if r.Test.P >= r.Test.Alpha {
		t.Errorf("rs[1]: p = %g, want significant", r.Test.P)
	}

	// Under six runs a median has no 95% interval: the ratio says so.
	few, err := Read(strings.NewReader(lines("store=atomic/wl=hotkey", 1, 3, 100, 0)+
		lines("store=atomic/policy=2windows/wl=hotkey", 1, 3, 130, 0)), "few")
	if err != nil {
		t.Fatal(err)
	}
	rs = few.PolicyRatios()
	if len(rs) != 1 || rs[0].String() != "1.30× [interval: too few runs]" {
		t.Errorf("ratios of a 3-run set = %v, want one, 1.30× [interval: too few runs]", rs)
	}
}

func TestMarkdownPolicies(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t, "2windows", "3tiers"))
	md := buf.String()
	assertHas(t, md, "report",
		"## Policies: what several windows and tiers cost",
		"| `mutex` | 2windows | hotkey | -cpu 2 | 154.5 ±2% | 274.5 ±1% | 1.78× [1.72–1.84×] | +77.67% p=0.000 n=10 | ≤ 1.6×: ✗ missed |",
		"| `mutex` | 2windows | hotkey | -cpu 4 † | 154.5 ±2% | 199.5 ±2% | 1.29× [1.24–1.34×] | +29.13% p=0.000 n=10 | not counted (†) |",
		"| `mutex` | 2windows | uniform-1k | -cpu 2 | 154.5 ±2% | 199.5 ±2% | 1.29× [1.24–1.34×] | +29.13% p=0.000 n=10 | ≤ 1.6×: ✓ met |",
		"| `striped` | 3tiers | uniform-1k | -cpu 2 | 129.5 ±3% | 135.8 ±3% | 1.05× [0.99–1.11×] | +4.83% p=0.000 n=10 | ≤ 1.1×: ✓ met by the medians; the interval reaches past it |",
		"| `atomic` | 3tiers | uniform-1k | -cpu 1 | 114.5 ±3% | 120.0 ±3% | 1.05× [0.99–1.11×] | +4.80% p=0.002 n=10 | ≤ 1.1×: ✓ met by the medians; the interval reaches past it |",
		"✓ atomic uniform-1k -cpu 2: 1.05× [0.99–1.11×]; the interval reaches past the target",
		"✓ atomic/policy=3tiers: at most 0 allocs/op (worst: uniform-1k -cpu 1)",
		"| `atomic/policy=3tiers` | — | — | 0 (0 B) |",
		"Checked by the generator on these results: 13 of 15 met.",
	)
	// The ns/op tables are of the one-window subjects: a policy row's
	// figures are in its own section, against its one-window row.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| `atomic/policy=2windows` | ") && strings.Contains(line, "±") {
			t.Errorf("an ns/op table holds a policy row: %s", line)
		}
	}

	buf.Reset()
	Markdown(&buf, fixture(t, "no-policies"))
	md = buf.String()
	assertHas(t, md, "report without policy rows",
		"## Policies: what several windows and tiers cost\n\nNot measured: these results hold no policy rows",
		"| not measured | ? policy=2windows rows and their one-window rows on hotkey, uniform-1k: not measured |",
		"| not measured | ? policy=3tiers rows and their one-window rows on uniform-1k: not measured |",
		"Checked by the generator on these results: 13 of 15 met.",
	)
}

func TestMarkdownDeltasPolicyRows(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t), fixture(t, "2windows"))
	assertHas(t, buf.String(), "report", "| `mutex/policy=2windows` | hotkey | 2 | 199.5 | 274.5 | +37.59% | p=0.000 n=10 |")
}

func TestReadOpRows(t *testing.T) {
	s := fixture(t)
	if got, want := fmt.Sprint(s.Subjects), "[mutex striped atomic floor xrate]"; got != want {
		t.Errorf("Subjects = %s, want %s (no op rows)", got, want)
	}
	want := "[mutex/op=allown mutex/op=wait mutex/op=reserve striped/op=allown striped/op=wait striped/op=reserve atomic/op=allown atomic/op=wait atomic/op=reserve]"
	if got := fmt.Sprint(s.OpRows); got != want {
		t.Errorf("OpRows = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(s.Workloads), "[hotkey hotkey-deny uniform-1k uniform-1M zipf-1M churn]"; got != want {
		t.Errorf("Workloads = %s, want %s", got, want)
	}
	for subject, want := range map[string]string{
		"atomic/op=wait":                    "atomic wait true atomic/op=allown",
		"atomic/clock=coarse/op=reserve":    "atomic/clock=coarse reserve true atomic/clock=coarse/op=allown",
		"atomic/op=wait/clock=coarse":       "atomic/clock=coarse wait true atomic/op=allown/clock=coarse",
		"striped/policy=2windows/op=allown": "striped/policy=2windows allown true striped/policy=2windows/op=allown",
	} {
		store, op, ok := opOf(subject)
		if got := fmt.Sprint(store, " ", op, " ", ok, " ", withOp(subject, opAllowN)); got != want {
			t.Errorf("opOf(%q), withOp = %s, want %s", subject, got, want)
		}
	}
	if _, _, ok := opOf("atomic/policy=2windows"); ok {
		t.Error("opOf found an op in atomic/policy=2windows")
	}
}

func TestWaitRatios(t *testing.T) {
	s := fixture(t, "reserve", "reserve-tie")
	rs := s.WaitRatios()
	if len(rs) != 3*2*2*3 { // 3 stores × (wait, reserve) × 2 workloads × 3 core counts
		t.Fatalf("%d ratios, want 36", len(rs))
	}
	for _, r := range rs {
		if r.Op == opAllowN || r.Base != r.Store+"/op=allown" {
			t.Errorf("ratio of %s against %s", r.Row, r.Base)
		}
	}
	r := rs[19] // mutex's 12, striped's wait 6, striped's reserve hotkey -cpu 1
	if got, want := fmt.Sprint(r.Row, " ", r.Store, " ", r.Op, " ", r.Workload, " ", r.Procs), "striped/op=reserve striped reserve hotkey 2"; got != want {
		t.Fatalf("rs[19] is %s, want %s", got, want)
	}
	if got, want := r.String(), "1.19× [1.14–1.25×]"; got != want || r.Test.P >= r.Test.Alpha {
		t.Errorf("rs[19] = %s, p = %g; want %s, significant", got, r.Test.P, want)
	}
	// A hair above AllowN with no significant difference still misses a
	// target of 1.00×, by the medians, and says so.
	v := Targets(s)[12]
	want := []string{
		"✗ mutex: 1.01× [0.97–1.05×]; no significant difference from AllowN (p=0.510 n=10)",
		"✗ striped: 1.19× [1.14–1.25×]",
		"✓ atomic: 0.95× [0.90–1.01×]; the interval reaches past the target",
	}
	if v.Met || !v.Measured || fmt.Sprint(v.Figures) != fmt.Sprint(want) {
		t.Errorf("%s: met %v, measured %v, figures %q; want missed, %q", v.Target, v.Met, v.Measured, v.Figures, want)
	}

	// Without their op=allown rows, wait and reserve rows have no ratio,
	// and the targets are not measured.
	var b strings.Builder
	b.WriteString(lines("store=atomic/wl=hotkey", 2, 3, 100, 0))
	b.WriteString(lines("store=atomic/op=wait/wl=hotkey", 2, 3, 100, 0))
	b.WriteString(lines("store=atomic/op=reserve/wl=hotkey", 2, 3, 100, 0))
	noBase, err := Read(strings.NewReader(b.String()), "no-base")
	if err != nil {
		t.Fatal(err)
	}
	if rs := noBase.WaitRatios(); len(rs) != 0 {
		t.Errorf("ratios without op=allown rows: %v", rs)
	}
	vs := Targets(noBase)
	for i, want := range map[int]string{
		11: "[? atomic/op=allown hotkey -cpu 2: not measured]",
		12: "[? atomic/op=reserve or atomic/op=allown on hotkey at -cpu 2: not measured]",
	} {
		if v := vs[i]; v.Met || v.Measured || fmt.Sprint(v.Figures) != want {
			t.Errorf("%s: met %v, measured %v, figures %q; want not measured, %s", v.Target, v.Met, v.Measured, v.Figures, want)
		}
	}
}

func TestMarkdownWaiting(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t, "wait", "reserve", "reserve-tie"))
	md := buf.String()
	assertHas(t, md, "report",
		"## Waiting: what Wait and Reserve cost\n\nEach store's `op=wait` row, `Wait(context.Background(), key, 1)`, and `op=reserve` row, `Reserve(key, 1, time.Second)`, against its `op=allown` row, `AllowN(key, 1)`",
		"| store | op | workload | cores | AllowN | op | ratio [interval] | test | target |",
		"| `mutex` | wait | hotkey | -cpu 1 | 169.5 ±2% | 177.8 ±2% | 1.05× [1.01–1.09×] | +4.87% p=0.000 n=10 | ≤ 1.10×: ✓ met |",
		"| `mutex` | wait | hotkey | -cpu 4 † | 169.5 ±2% | 177.8 ±2% | 1.05× [1.01–1.09×] | +4.87% p=0.000 n=10 | not counted (†) |",
		"| `mutex` | reserve | hotkey | -cpu 1 | 169.5 ±2% | 161.2 ±2% | 0.95× [0.91–0.99×] | -4.87% p=0.000 n=10 |  |",
		"| `mutex` | reserve | hotkey | -cpu 2 | 169.5 ±2% | 170.5 ±2% | 1.01× [0.97–1.05×] | ~ p=0.510 n=10 | ≤ 1.00×: ✗ missed; no significant difference |",
		"| `striped` | reserve | hotkey | -cpu 2 | 142.0 ±2% | 169.5 ±2% | 1.19× [1.14–1.25×] | +19.37% p=0.000 n=10 | ≤ 1.00×: ✗ missed |",
		"| `atomic` | wait | hotkey | -cpu 2 | 125.5 ±3% | 131.6 ±3% | 1.05× [0.99–1.11×] | +4.82% p=0.000 n=10 | ≤ 1.10×: ✓ met by the medians; the interval reaches past it |",
		"| `atomic` | wait | uniform-1k | -cpu 2 | 125.5 ±3% | 161.8 ±2% | 1.29× [1.23–1.35×] | +28.92% p=0.000 n=10 | ≤ 1.10×: ✗ missed |",
		"| `atomic` | reserve | hotkey | -cpu 2 | 125.5 ±3% | 119.5 ±3% | 0.95× [0.90–1.01×] | -4.82% p=0.000 n=10 | ≤ 1.00×: ✓ met by the medians; the interval reaches past it |",
		"Targets (see Targets): Wait ≤ 1.10× AllowN on every workload, counted at core counts up to the machine's CPUs; Reserve ≤ 1.00× AllowN on hotkey at -cpu 2.",
		"✓ atomic/op=wait: at most 0 allocs/op (worst: hotkey -cpu 1)",
		"| `atomic/op=reserve` | 0 (0 B) | — | 0 (0 B) | — | — | — |",
		"| Wait on a key that has tokens ≤ 1.10× AllowN (ns/op, every store, op=wait ÷ op=allown) on every workload measured (every core count up to the CPUs); in brackets, bounds from the two medians' 95% intervals | **missed** |",
		"| Reserve on hotkey at -cpu 2 ≤ 1.00× AllowN (ns/op, every store, op=reserve ÷ op=allown); in brackets, bounds from the two medians' 95% intervals | **missed** |",
		"Checked by the generator on these results: 13 of 15 met.",
	)
	// The ns/op tables and charts are of the subjects: an op row's
	// figures are in its own section, against its op=allown row.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| `atomic/op=wait` | ") && strings.Contains(line, "±") {
			t.Errorf("an ns/op table holds an op row: %s", line)
		}
	}

	buf.Reset()
	Markdown(&buf, fixture(t, "no-waiting"))
	md = buf.String()
	assertHas(t, md, "report without wait rows",
		"## Waiting: what Wait and Reserve cost\n\nNot measured: these results hold no wait rows (`store=<store>/op=wait/wl=<workload>` and `op=reserve`, see bench/doc.go) beside their `op=allown` rows.",
		"| not measured | ? op=wait rows and their op=allown rows: not measured |",
		"| not measured | ? op=reserve rows and their op=allown rows on hotkey at -cpu 2: not measured |",
		"Checked by the generator on these results: 13 of 15 met.",
	)
	if strings.Contains(md, "| store | op | workload |") {
		t.Error("a report without wait rows has a wait table")
	}
}

func TestMarkdownDeltasOpRows(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, fixture(t), fixture(t, "wait"))
	assertHas(t, buf.String(), "report", "| `atomic/op=wait` | uniform-1k | 2 | 131.6 | 161.8 | +23.00% | p=0.000 n=10 |")
}

// TestMarkdownContention: the retries/op of atomic's rows are tabled by
// core count, and a set without them has no such section.
func TestMarkdownContention(t *testing.T) {
	var b strings.Builder
	b.WriteString("goos: linux\n")
	b.WriteString(lines("store=mutex/wl=hotkey", 1, 3, 50, 0))
	for _, p := range []int{1, 2} {
		for i := range 3 {
			suffix := map[int]string{1: "", 2: "-2"}[p]
			fmt.Fprintf(&b, "BenchmarkAllow/store=atomic/wl=hotkey%s \t1000\t%d ns/op\t1.000 allowed/op\t%g retries/op\t0 B/op\t0 allocs/op\n",
				suffix, 40+i, float64(p-1)*0.01*float64(i+1))
		}
	}
	s, err := Read(strings.NewReader(b.String()), "in")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	Markdown(&buf, s)
	md := buf.String()
	assertHas(t, md, "report",
		"## Compare-and-swap retries",
		"| store | workload | -cpu 1 | -cpu 2 |",
		"| `atomic` | `hotkey` | 0 | 0.02 |",
	)
	if strings.Contains(md, "| `mutex` | `hotkey` |") {
		t.Error("the retries table has a row for mutex, which reports no retries/op")
	}

	buf.Reset()
	Markdown(&buf, fixture(t))
	if strings.Contains(buf.String(), "Compare-and-swap retries") {
		t.Error("a set without retries/op has a retries section")
	}
}

// TestTargetsExactKeys: issue 16's target reads atomic's and striped's
// B/key and forced GC, and misses on either.
func TestTargetsExactKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("goos: linux\n")
	b.WriteString(lines("store=atomic/wl=hotkey", 1, 3, 50, 0))
	b.WriteString(memLines("striped", 5, 38, 3e6))
	b.WriteString(memLines("atomic", 5, 90, 40e6))
	s, err := Read(strings.NewReader(b.String()), "in")
	if err != nil {
		t.Fatal(err)
	}
	v := s.exactKeys()
	want := []string{"✗ atomic: 90.0 B/key", "✗ atomic: forced GC 40.0 ms", "✓ striped: 38.0 B/key", "✓ striped: forced GC 3.0 ms"}
	if v.Met || !v.Measured || !slices.Equal(v.Figures, want) {
		t.Errorf("exactKeys: met %v, measured %v, figures %q; want missed with %q", v.Met, v.Measured, v.Figures, want)
	}
}

// TestFmtSmall: a call with no round trip (op=deny-cached, 0.2 µs against
// 100 µs) shows its figures, not 0.0 µs and 0.00×.
func TestFmtSmall(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtMicros(197), "0.197 µs"},
		{fmtMicros(110e3), "110.0 µs"},
		{fmtRatio(0.0017, true), "0.0017×"},
		{fmtRatio(1.7, true), "1.70×"},
		{fmtRatio(0, false), "—"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
