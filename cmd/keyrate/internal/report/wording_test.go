package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// valueLines returns one BenchmarkAllow line of name at -cpu procs per
// ns/op value.
func valueLines(name string, procs int, ns ...float64) string {
	suffix := ""
	if procs != 1 {
		suffix = fmt.Sprintf("-%d", procs)
	}
	var b strings.Builder
	for _, v := range ns {
		fmt.Fprintf(&b, "BenchmarkAllow/%s%s \t1000\t%g ns/op\t0 B/op\t0 allocs/op\n", name, suffix, v)
	}
	return b.String()
}

// Two samples whose medians are 1.05× apart but which a Mann-Whitney U
// test cannot tell apart (p ≈ 0.5), and two that it tells apart whose
// medians are 1.003× apart.
var (
	spreadFast = []float64{80, 85, 90, 95, 100, 105, 110, 115, 120, 125}
	spreadSlow = []float64{85, 90, 95, 100, 105, 110, 115, 120, 125, 130}
	tight      = []float64{100, 100.01, 100.02, 100.03, 100.04, 100.05, 100.06, 100.07, 100.08, 100.09}
	tightSlow  = []float64{100.3, 100.31, 100.32, 100.33, 100.34, 100.35, 100.36, 100.37, 100.38, 100.39}
)

// summaryOf returns the summary section of the report on s.
func summaryOf(t *testing.T, s *Set) string {
	t.Helper()
	var buf bytes.Buffer
	Markdown(&buf, s)
	md := buf.String()
	i := strings.Index(md, "## Summary")
	require.GreaterOrEqual(t, i, 0)
	summary, _, _ := strings.Cut(md[i:], "\n## ")
	return summary
}

// TestSpeedAsFastAs: a store whose median rounds to xrate's is "as fast
// as xrate", in the summary, the README brief and the target's figures,
// never "as fast than xrate".
func TestSpeedAsFastAs(t *testing.T) {
	s := readOK(t, valueLines("store=atomic/wl=hotkey", 1, tight...)+valueLines("store=xrate/wl=hotkey", 1, tightSlow...), "tie")
	var all bytes.Buffer
	Markdown(&all, s)
	Brief(&all, "r/README.md", s)
	assert.NotContains(t, all.String(), "as fast than")
	assert.Contains(t, summaryOf(t, s), "as fast as xrate")
	for _, v := range Targets(s) {
		for _, f := range v.Figures {
			assert.NotContains(t, f, "as fast than", "%s", v.Target)
		}
	}
}

// TestSpeedNotSignificant: medians 1.05× apart whose samples a U test
// cannot tell apart are no "1.05× faster": the summary, the README brief
// and an option's line say the two are statistically tied.
func TestSpeedNotSignificant(t *testing.T) {
	in := valueLines("store=atomic/wl=hotkey", 2, spreadFast...) +
		valueLines("store=xrate/wl=hotkey", 2, spreadSlow...) +
		valueLines("store=atomic/clock=coarse/wl=hotkey", 2, spreadFast...) +
		valueLines("store=atomic/wl=zipf-1M", 2, spreadSlow...) +
		valueLines("store=xrate/wl=zipf-1M", 2, spreadSlow...) +
		valueLines("store=atomic/clock=coarse/wl=zipf-1M", 2, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59)
	s := readOK(t, in, "noise")
	s.Machine = []Fact{{"cores", "2"}}
	sum := summaryOf(t, s)
	hot := sum[strings.Index(sum, "- **hotkey**"):]
	hot, _, _ = strings.Cut(hot, "\n")
	assert.NotContains(t, hot, "faster than xrate", "hotkey's line: %s", hot)
	assert.Contains(t, hot, "statistically tied with xrate (p=")

	coarse := sum[strings.Index(sum, "- `atomic/clock=coarse`"):]
	coarse, _, _ = strings.Cut(coarse, "\n")
	// zipf-1M: 1.97× faster, significant; hotkey: 1.00×, no difference.
	assert.Contains(t, coarse, "1.97× faster")
	assert.NotContains(t, coarse, "from ", "a range of one significant ratio: %s", coarse)
	assert.Contains(t, coarse, "statistically tied on hotkey")

	var brief bytes.Buffer
	Brief(&brief, "r/README.md", s)
	assert.NotContains(t, brief.String(), "faster than `xrate`) on `hotkey`")
	assert.Contains(t, brief.String(), "`atomic` 102.5 ns/op on `hotkey` (statistically tied with `xrate`)")
}
