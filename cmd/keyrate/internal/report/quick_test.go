package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// quickSet is a result set as make report's quick set writes it: large
// workloads of 100k keys and BenchmarkMemory with 100k keys (its keys
// metric), at -cpu 1 and 2, 6 runs each; with large = "1M" and no keys
// metric, as a full set of an earlier run.
func quickSet(t *testing.T, large string, memKeys int) *Set {
	t.Helper()
	var b strings.Builder
	b.WriteString("cores: 2\n")
	for _, st := range []string{"atomic", "striped", "xrate"} {
		for _, wl := range []string{"hotkey", "uniform-1k", "uniform-" + large, "uniform-" + large + "-idle", "zipf-" + large} {
			for _, p := range []int{1, 2} {
				b.WriteString(lines("store="+st+"/wl="+wl, p, 6, 100, 0))
			}
		}
	}
	for _, st := range []string{"atomic", "striped"} {
		for range 6 {
			fmt.Fprintf(&b, "BenchmarkMemory/store=%s-2 \t1\t1000 ns/op\t40 B/key\t1e+06 gc-ns", st)
			if memKeys > 0 {
				fmt.Fprintf(&b, "\t%d keys", memKeys)
			}
			b.WriteString("\n")
		}
	}
	s, err := Read(strings.NewReader(b.String()), "quick")
	if err != nil {
		t.Fatal(err)
	}
	s.Machine = []Fact{{"cores", "2"}}
	return s
}

func TestQuickSetSaysWhatItCannotShow(t *testing.T) {
	s := quickSet(t, "100k", 100_000)
	if got := s.largeKeys(); got != 100_000 {
		t.Errorf("largeKeys = %d, want 100000", got)
	}
	if got := s.memoryKeys(); got != 100_000 {
		t.Errorf("memoryKeys = %d, want 100000", got)
	}
	var b bytes.Buffer
	Markdown(&b, s)
	md := b.String()
	assertHas(t, md, "quick report",
		"**A quick set** (`make report`): the large workloads have 100k keys, not a million, and BenchmarkMemory inserted 100k keys a store. It cannot show:",
		"memory per key and the forced GC's time with a million keys",
		"the cache and TLB misses of a table of a million keys",
		"core counts above 2",
		"which 6 runs on a shared machine leave wide",
		"`make report FULL=1` runs the full matrix.",
		"## Memory and GC with 100k keys",
		"after inserting 100k 16-byte keys",
		"B/key with 100k 16-byte keys.",
	)
	if i, j := strings.Index(md, "**A quick set**"), strings.Index(md, "## Machine"); i < 0 || j < i {
		t.Error("the quick set's note is not in the report's header, before the machine")
	}
	for _, v := range Targets(s) {
		switch {
		case strings.HasPrefix(v.Target, "Memory"), strings.HasPrefix(v.Target, "Exact keys"):
			if v.Measured || !strings.Contains(strings.Join(v.Figures, " "), "with a million keys (these results inserted 100k)") {
				t.Errorf("%s: %q; want not measured at 100k keys", v.Target, v.Figures)
			}
		case strings.Contains(v.Target, "uniform-1M, zipf-1M"):
			if v.Measured || len(v.Figures) != 1 || !strings.Contains(v.Figures[0], "100k keys in their large workloads") {
				t.Errorf("%s: %q; want one figure, not measured, naming the 100k keys", v.Target, v.Figures)
			}
		}
	}
	var brief strings.Builder
	Brief(&brief, "r/README.md", s)
	assertHas(t, brief.String(), "brief", "B/key with 100k keys.")
}

func TestFullSetHasNoQuickNote(t *testing.T) {
	for _, memKeys := range []int{0, 1_000_000} { // before the keys metric, and with it
		s := quickSet(t, "1M", memKeys)
		var b bytes.Buffer
		Markdown(&b, s)
		md := b.String()
		if strings.Contains(md, "quick set") {
			t.Errorf("keys metric %d: a full set's report has the quick note", memKeys)
		}
		assertHas(t, md, "full report", "## Memory and GC with a million keys", "after inserting 1M 16-byte keys")
	}
}

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int{"1M": 1_000_000, "100k": 100_000, "1k": 1000, "4096": 4096, "2M": 2_000_000} {
		if got, ok := parseCount(in); !ok || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, got, ok, want)
		}
		if got := countName(want); got != in {
			t.Errorf("countName(%d) = %q, want %q", want, got, in)
		}
	}
	for _, in := range []string{"", "k", "M", "-1k", "1.5M", "idle", "0"} {
		if n, ok := parseCount(in); ok {
			t.Errorf("parseCount(%q) = %d, want no count", in, n)
		}
	}
}
