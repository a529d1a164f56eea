package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFmtSpeed(t *testing.T) {
	for x, want := range map[float64]string{
		1.25:   "1.25× faster",
		0.8:    "1.25× slower",
		2:      "2.00× faster",
		0.5:    "2.00× slower",
		1:      "as fast",
		1.004:  "as fast",
		0.9961: "as fast",
		0.99:   "1.01× slower",
	} {
		assert.Equal(t, want, fmtSpeed(x), "fmtSpeed(%g)", x)
	}
}

// variantSet is a set in which the coarse-clock variant of atomic is the
// fastest subject everywhere and mutex is slower than xrate on uniform-1M.
func variantSet(t *testing.T) *Set {
	t.Helper()
	ns := map[string]float64{"floor": 100, "atomic": 110, "atomic/clock=coarse": 60, "mutex": 150, "xrate": 400}
	var b strings.Builder
	for subj := range ns {
		for _, wl := range []string{"hotkey", "uniform-1k", "uniform-1M", "zipf-1M"} {
			for _, p := range []int{1, 2} {
				v := ns[subj]
				if subj == "mutex" && wl == "uniform-1M" {
					v = 500
				}
				b.WriteString(lines("store="+subj+"/wl="+wl, p, 10, v, 0))
			}
		}
	}
	for subj, perKey := range map[string]float64{"atomic": 80, "atomic/clock=coarse": 80, "mutex": 90} {
		b.WriteString(memLines(subj, 5, perKey, 1e6))
	}
	s, err := Read(strings.NewReader(b.String()), "variants")
	require.NoError(t, err)
	return s
}

// TestSummaryNamesStores: the summary recommends stores as New builds
// them, never an option such as the coarse clock, which it names only
// with its lag; no ratio reads "0.80× faster".
func TestSummaryNamesStores(t *testing.T) {
	var buf bytes.Buffer
	Markdown(&buf, variantSet(t))
	md := buf.String()
	summary, _, ok := strings.Cut(md[strings.Index(md, "## Summary"):], "\n## ")
	require.True(t, ok, "the report has a summary section followed by another")

	assert.Contains(t, summary, "- **uniform-1k**: `atomic`, 114.5 ns/op, 3.53× faster than xrate, 1.10× floor's time; next is `mutex`")
	assert.Contains(t, summary, "In short: `atomic` is both the fastest on most workloads and the leanest.")
	assert.NotContains(t, summary, "**: `atomic/clock=coarse`", "an option is never the pick")
	assert.Contains(t, summary, "- `atomic/clock=coarse`: the store reading a `clock.NewCoarse` cached clock")
	assert.Contains(t, summary, "lags real time by up to its resolution")
	assert.Contains(t, summary, "At -cpu 2, against `atomic` (ratio of medians): 1.78× faster on each of 4 workloads.")
	assert.Contains(t, summary, "Memory: 80.0 B/key against 80.0.")

	v := Targets(variantSet(t))
	var speedup *Verdict
	for i := range v {
		if strings.HasPrefix(v[i].Target, "Every store ≥") {
			speedup = &v[i]
		}
	}
	require.NotNil(t, speedup, "the xrate speed-up target is checked")
	assert.Contains(t, speedup.Figures, "✗ mutex: 1.25× slower than xrate at worst (on uniform-1M -cpu 1)")
	for _, f := range speedup.Figures {
		assert.NotRegexp(t, `0\.\d+× faster`, f)
	}
	assert.NotRegexp(t, `0\.\d+× faster`, md)
}

// TestChartLayout: every subject is drawn with its own colour and marker,
// each point carries its 95% interval, and the legend lies in a column
// right of the plot.
func TestChartLayout(t *testing.T) {
	seen := map[string]int{}
	for i, subj := range []string{"mutex", "striped", "striped/keys=hashed", "atomic", "atomic/clock=coarse", "floor", "xrate"} {
		col, glyph, dashes := subjectStyle(i, subj)
		r, g, b, _ := col.RGBA()
		key := string(rune(r>>8)) + string(rune(g>>8)) + string(rune(b>>8))
		if j, dup := seen[key]; dup {
			t.Errorf("subjects %d and %d share a colour", j, i)
		}
		seen[key] = i
		assert.NotNil(t, glyph)
		assert.Equal(t, subj == "floor" || subj == "xrate", dashes != nil, "%s: only baselines are dashed", subj)
	}
	for i := range glyphShapes {
		for j := range i {
			assert.NotEqual(t, glyphShapes[i], glyphShapes[j], "markers %d and %d", i, j)
		}
	}

	s := variantSet(t)
	tp, ok := subjectThroughput(s, "atomic", "hotkey")
	require.True(t, ok)
	require.Len(t, tp.XYs, 2, "one point per -cpu value")
	sum, _ := s.Summary(allow("atomic", "hotkey", 1, unitNs))
	assert.InDelta(t, 1e3/sum.Center, tp.XYs[0].Y, 1e-9)
	assert.InDelta(t, 1e3/sum.Center-1e3/sum.Hi, tp.YErrors[0].Low, 1e-9, "the bar reaches 10³ ÷ the interval's high bound")
	assert.InDelta(t, 1e3/sum.Lo-1e3/sum.Center, tp.YErrors[0].High, 1e-9, "and 10³ ÷ its low bound")
	assert.Positive(t, tp.YErrors[0].Low+tp.YErrors[0].High, "ten different runs have an interval")

	var svg bytes.Buffer
	require.NoError(t, writeChart(&svg, s, "hotkey", "svg"))
	for _, subj := range s.Subjects {
		assert.Contains(t, svg.String(), ">"+subj+"<", "the legend names %s", subj)
	}
	assert.Contains(t, svg.String(), `width="`, "an SVG")
	assert.NotContains(t, svg.String(), `width="576pt"`, "wider than the plot alone (8in was the old width)")
}

// TestOptionOneWorkloadNamed: an option that a U test tells from its store
// on one workload only names that workload with its ratio, and the rest
// as ties, rather than a bare "1.24× faster" that reads as everywhere.
func TestOptionOneWorkloadNamed(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 2, 10, 100, 0) +
		lines("store=atomic/clock=coarse/wl=hotkey", 2, 10, 100, 0) +
		lines("store=atomic/wl=churn", 2, 10, 200, 0) +
		lines("store=atomic/clock=coarse/wl=churn", 2, 10, 100, 0)
	var b bytes.Buffer
	Markdown(&b, readOK(t, in, "one.txt"))
	assert.Contains(t, b.String(), "(ratio of medians): 1.96× faster on churn; statistically tied on hotkey")
}
