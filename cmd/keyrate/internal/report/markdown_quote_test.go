package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMachineFactBackticks: a machine fact holding a backtick (a command
// with a shell substitution) stays one code span in its table cell, and
// a "|" in it does not split the cell.
func TestMachineFactBackticks(t *testing.T) {
	s := readOK(t, lines("store=atomic/wl=hotkey", 1, 3, 40, 0), "m")
	s.Machine = []Fact{{"command", "go test -cpu `nproc` | tee x"}}
	var buf bytes.Buffer
	Markdown(&buf, s)
	assert.Contains(t, buf.String(), "| command | `` go test -cpu `nproc` \\| tee x `` |")
}

// TestBriefLinkWithSpace: a report directory with a space in its name
// is linked so that the markdown link holds: <...> around the target.
func TestBriefLinkWithSpace(t *testing.T) {
	s := readOK(t, lines("store=atomic/wl=hotkey", 1, 3, 40, 0), "m")
	var buf bytes.Buffer
	Brief(&buf, "docs/my report/README.md", s)
	assert.Contains(t, buf.String(), "**Latest full report: [docs/my report](<docs/my report/README.md>)**")
}
