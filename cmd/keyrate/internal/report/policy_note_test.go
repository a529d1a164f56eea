package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyMissNotSignificant: a policy row whose median misses its
// target but which a U test cannot tell from its one-window row says so,
// in the target's figure and the policies table, as a Wait row does.
func TestPolicyMissNotSignificant(t *testing.T) {
	row := make([]float64, len(spreadFast))
	for i, v := range spreadFast {
		row[i] = v * 1.15
	}
	s := readOK(t, valueLines("store=atomic/wl=uniform-1k", 2, spreadFast...)+
		valueLines("store=atomic/policy=3tiers/wl=uniform-1k", 2, row...), "p")
	s.Machine = []Fact{{"cores", "2"}}
	rs := s.PolicyRatios()
	require.Len(t, rs, 1)
	require.GreaterOrEqual(t, rs[0].Test.P, rs[0].Test.Alpha, "the fixture's row is no significant difference")

	v := s.policyOverhead(threeTiers, "three tiers", "one limit")
	require.Len(t, v.Figures, 1)
	assert.Equal(t, "✗ atomic uniform-1k -cpu 2: "+rs[0].String()+"; no significant difference from the one-window row ("+rs[0].Test.String()+")", v.Figures[0])

	var buf bytes.Buffer
	Markdown(&buf, s)
	assert.True(t, strings.Contains(buf.String(), "| ≤ 1.1×: ✗ missed; no significant difference |"), "the policies table's target cell")
}
