package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// mwLines returns n BenchmarkMiddleware lines for mw on outcome at procs,
// as bench/middleware_test.go prints them: ns/op values ns, ns+1, ...
func mwLines(mw, outcome string, procs, n int, ns float64, allocs int) string {
	suffix := ""
	if procs != 1 {
		suffix = fmt.Sprintf("-%d", procs)
	}
	allowed := "1.000"
	if outcome == "denied" {
		allowed = "0"
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "BenchmarkMiddleware/mw=%s/keys=1k/outcome=%s%s \t100000\t%g ns/op\t%s allowed/op\t%d B/op\t%d allocs/op\n",
			mw, outcome, suffix, ns+float64(i), allowed, 64*allocs, allocs)
	}
	return b.String()
}

// mwSet is a result set with one BenchmarkAllow cell and BenchmarkMiddleware
// for httplimit and two peers at -cpu 1 and 2 on both outcomes, 6 runs
// each: httplimit at 400 ns/op and 1 allocation, httprate twice that,
// tollbooth three times. slowAt2 makes httplimit as slow as tollbooth at
// -cpu 2 when allowed, allocs its allocations.
func mwSet(t *testing.T, slowAt2 bool, allocs int) *Set {
	t.Helper()
	var b strings.Builder
	b.WriteString(lines("store=atomic/wl=hotkey", 1, 6, 40, 0))
	for _, oc := range []string{"allowed", "denied"} {
		for _, p := range []int{1, 2} {
			ns := 400.0
			if slowAt2 && p == 2 && oc == "allowed" {
				ns = 1300
			}
			b.WriteString(mwLines("httplimit", oc, p, 6, ns, allocs))
			b.WriteString(mwLines("httprate", oc, p, 6, 800, 10))
			b.WriteString(mwLines("tollbooth", oc, p, 6, 1200, 26))
		}
	}
	s, err := Read(strings.NewReader(b.String()), "mw")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) > 0 {
		t.Fatalf("warnings: %v", s.Warnings)
	}
	return s
}

func TestMiddlewareRead(t *testing.T) {
	s := mwSet(t, false, 1)
	if got, want := strings.Join(s.Middlewares, ","), "httplimit,httprate,tollbooth"; got != want {
		t.Errorf("Middlewares = %s, want %s", got, want)
	}
	if got, want := strings.Join(s.MiddlewareRuns, ","), "keys=1k/outcome=allowed,keys=1k/outcome=denied"; got != want {
		t.Errorf("MiddlewareRuns = %s, want %s", got, want)
	}
	if got := fmt.Sprint(s.MiddlewareProcs); got != "[1 2]" {
		t.Errorf("MiddlewareProcs = %s, want [1 2]", got)
	}
	if got := strings.Join(s.Subjects, ","); got != "atomic" {
		t.Errorf("Subjects = %s: a middleware is no store", got)
	}
	if m, ok := s.Median(mwCell("httprate", "keys=1k/outcome=denied", 2, unitNs)); !ok || m != 802.5 {
		t.Errorf("httprate denied -cpu 2 median = %v, %v; want 802.5", m, ok)
	}
}

func TestMiddlewareReadWarns(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 1, 1, 40, 0) +
		"BenchmarkMiddleware/keys=1k/outcome=allowed-2 \t1000\t400 ns/op\n"
	s, err := Read(strings.NewReader(in), "bad")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || len(s.Middlewares) != 0 {
		t.Errorf("got warnings %q and middlewares %q; want 1 warning, no middleware", s.Warnings, s.Middlewares)
	}
}

func TestMiddlewareSection(t *testing.T) {
	s := mwSet(t, false, 1)
	var b bytes.Buffer
	Markdown(&b, s)
	md := b.String()
	assertHas(t, md, "report",
		"## httplimit against other middlewares",
		"### keys=1k, outcome=allowed",
		"### keys=1k, outcome=denied",
		"| `httplimit` | -cpu 1 | 402.5 ±",
		"| `httprate` | -cpu 2 | 802.5 ±",
		"1.99× [",
		"+99.38% p=0.002 n=6",
		"| 10 | 640 |",
		"httplimit faster than every other middleware measured",
	)
	v := s.middlewareTarget()
	if !v.Met || !v.Measured {
		t.Errorf("target not met: %+v", v)
	}
	if n := len(v.Figures); n != 2*2*2+2 {
		t.Errorf("%d figures, want 10 (2 peers × 2 outcomes × 2 core counts, and httplimit's allocations at 2 core counts): %q", n, v.Figures)
	}
}

func TestMiddlewareTargetMissed(t *testing.T) {
	for _, c := range []struct {
		name    string
		slowAt2 bool
		allocs  int
		want    string
	}{
		{"slower than tollbooth at -cpu 2", true, 1, "✗ tollbooth keys=1k/outcome=allowed -cpu 2: httplimit 1.08× slower than tollbooth"},
		{"two allocations", false, 2, "✗ httplimit keys=1k/outcome=allowed -cpu 1: 2 allocs/op"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := mwSet(t, c.slowAt2, c.allocs).middlewareTarget()
			if v.Met {
				t.Errorf("target met: %q", v.Figures)
			}
			assertHas(t, strings.Join(v.Figures, "\n"), "figures", c.want)
		})
	}
}

// TestMiddlewareTargetOnlyWhenMeasured: a set without BenchmarkMiddleware
// (every report of an earlier run) has neither its section nor its target,
// so that those reports and the README figures from them stay as they were.
func TestMiddlewareTargetOnlyWhenMeasured(t *testing.T) {
	s := fixture(t)
	for _, v := range Targets(s) {
		if strings.Contains(v.Target, "middleware") {
			t.Errorf("a set without BenchmarkMiddleware has the target %q", v.Target)
		}
	}
	var b bytes.Buffer
	Markdown(&b, s)
	if strings.Contains(b.String(), "other middlewares") {
		t.Error("a set without BenchmarkMiddleware has its section")
	}
	if n, m := len(Targets(s)), len(Targets(mwSet(t, false, 1))); m != n+1 {
		t.Errorf("%d targets with BenchmarkMiddleware, %d without; want one more", m, n)
	}
}
