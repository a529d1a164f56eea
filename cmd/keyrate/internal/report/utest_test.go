package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/perf/benchmath"
)

// Samples of different sizes with tied values (go test prints times of
// 1 µs and more as whole nanoseconds, so ties are common): go-moremath's
// Mann-Whitney U test, under benchmath, can return p = 0 for one order
// of the two samples and not for the other, or a p above 1. The report
// must not call a difference significant on such a p: its compare takes
// the test both ways and keeps the larger p, at most 1.

// twentyTied is 20 runs of ten values, each twice.
var twentyTied = []float64{41, 41, 42, 42, 43, 43, 44, 44, 45, 45, 46, 46, 47, 47, 48, 48, 49, 49, 50, 50}

func TestCompareSymmetric(t *testing.T) {
	mk := func(v ...float64) *benchmath.Sample { return benchmath.NewSample(v, &benchmath.DefaultThresholds) }
	for _, c := range []struct{ a, b []float64 }{
		{twentyTied, []float64{40}},
		{[]float64{1, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{5}},
		{[]float64{40, 40, 41, 42, 43, 44, 45, 46, 47, 47}, []float64{39, 40, 40, 41, 42, 44}},
	} {
		ab, ba := compare(mk(c.a...), mk(c.b...)), compare(mk(c.b...), mk(c.a...))
		assert.Equal(t, ab.P, ba.P, "%v vs %v", c.a, c.b)
		assert.True(t, ab.P > 0 && ab.P <= 1, "p = %v", ab.P)
	}
	// A single run below 20 others: the exact p is 2/21.
	assert.InDelta(t, 2.0/21, compare(mk(twentyTied...), mk(40)).P, 1e-9)
}

// TestDeltaOneRunAfter: a before set of 20 runs and an after set of one
// run below them all is no significant change (p = 2/21): the delta is
// "~", not "-12.09%" with "n=20+1".
func TestDeltaOneRunAfter(t *testing.T) {
	before := readOK(t, valueLines("store=atomic/wl=hotkey", 1, twentyTied...), "before")
	after := readOK(t, valueLines("store=atomic/wl=hotkey", 1, 40), "after")
	var buf bytes.Buffer
	Markdown(&buf, before, after)
	md := buf.String()
	row := md[strings.Index(md, "| `atomic` | hotkey | 1 |"):]
	row, _, _ = strings.Cut(row, "\n")
	assert.Equal(t, fmt.Sprintf("| `atomic` | hotkey | 1 | 45.50 | 40.00 | ~ | p=%.3f n=20+1 |", 2.0/21), row)
}
