package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// tiedWinsSet: atomic is fastest on hotkey, mutex on uniform-1k, each by
// a clear margin, and on zipf-1M atomic's median is lowest but striped's
// sample cannot be told from it; striped is the leanest.
func tiedWinsSet(t *testing.T) *Set {
	t.Helper()
	in := valueLines("store=atomic/wl=hotkey", 2, tight...) +
		valueLines("store=mutex/wl=hotkey", 2, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209) +
		valueLines("store=striped/wl=hotkey", 2, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309) +
		valueLines("store=atomic/wl=uniform-1k", 2, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209) +
		valueLines("store=mutex/wl=uniform-1k", 2, tight...) +
		valueLines("store=striped/wl=uniform-1k", 2, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309) +
		valueLines("store=atomic/wl=zipf-1M", 2, spreadFast...) +
		valueLines("store=striped/wl=zipf-1M", 2, spreadSlow...) +
		valueLines("store=mutex/wl=zipf-1M", 2, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309) +
		memLines("atomic", 5, 60, 1e6) + memLines("mutex", 5, 90, 1e6) + memLines("striped", 5, 40, 1e6)
	s := readOK(t, in, "ties")
	s.Machine = []Fact{{"cores", "2"}}
	return s
}

// TestSummaryTiedWins: the win count says how many of its wins are
// statistical ties, and "In short" names no store fastest on most
// workloads when two share the most wins.
func TestSummaryTiedWins(t *testing.T) {
	s := tiedWinsSet(t)
	sum := summaryOf(t, s)
	assert.Contains(t, sum, "Fastest at -cpu 2, by workload count: `atomic` on 2, `mutex` on 1 of 3 workloads; on 1 of them (zipf-1M) the runner-up is statistically tied.")
	// atomic has 2 wins, one a tie; mutex 1: atomic does lead.
	assert.Contains(t, sum, "In short: `atomic` where time per call matters most, `striped` where memory per key does.")

	var brief bytes.Buffer
	Brief(&brief, "r/README.md", s)
	assert.Contains(t, brief.String(), "`atomic` on 2, `mutex` on 1 of 3 workloads (on 1 the runner-up is statistically tied)")

	// Without zipf-1M: one win each.
	two := readOK(t, valueLines("store=atomic/wl=hotkey", 2, tight...)+
		valueLines("store=mutex/wl=hotkey", 2, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209)+
		valueLines("store=atomic/wl=uniform-1k", 2, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209)+
		valueLines("store=mutex/wl=uniform-1k", 2, tight...)+
		memLines("atomic", 5, 60, 1e6)+memLines("mutex", 5, 90, 1e6), "split")
	two.Machine = []Fact{{"cores", "2"}}
	sum = summaryOf(t, two)
	assert.NotContains(t, sum, "where time per call matters most", "no store leads: %s", sum)
	assert.NotContains(t, sum, "is both the fastest")
	assert.Contains(t, sum, "In short: no store is fastest on most workloads (`atomic` and `mutex` on 1 each); `atomic` is the leanest.")
}

// TestSummaryUnknownCores: without machine.txt the summary does not claim
// its core count is the most the machine has without oversubscribing it,
// and "1 run" is singular.
func TestSummaryUnknownCores(t *testing.T) {
	s := readOK(t, lines("store=atomic/wl=hotkey", 1, 1, 40, 0)+lines("store=atomic/wl=hotkey", 4, 1, 40, 0), "one")
	var buf bytes.Buffer
	Markdown(&buf, s)
	md := buf.String()
	assert.NotContains(t, md, "the most cores this machine has")
	assert.Contains(t, md, "from the medians at -cpu 4 (the most measured: no machine.txt says how many CPUs the machine has)")
	assert.Contains(t, md, "Medians of 1 run each")
}
