package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadSkipsPipeInName: a result whose name holds '|' would split its
// row of every markdown table it appears in (a workload column that
// shifts the rest one cell right); it is skipped with a warning naming
// the line, and the others are kept.
func TestReadSkipsPipeInName(t *testing.T) {
	in := lines("store=atomic/wl=hotkey", 1, 3, 40, 0) +
		lines("store=atomic/wl=a|b", 1, 1, 40, 0) + // line 4
		lines("store=mu|tex/wl=hotkey", 1, 1, 40, 0) // line 5
	s := readOK(t, in, "pipe.txt")
	require.Len(t, s.Warnings, 2, "warnings %q", s.Warnings)
	assert.Contains(t, s.Warnings[0], "pipe.txt:4: BenchmarkAllow/store=atomic/wl=a|b: ")
	assert.Contains(t, s.Warnings[0], "'|'")
	assert.Contains(t, s.Warnings[1], "pipe.txt:5: ")
	assert.Equal(t, []string{"atomic"}, s.Subjects)
	assert.Equal(t, []string{"hotkey"}, s.Workloads)
}
