package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestChartDodge: the subjects' points at one -cpu value are drawn side
// by side, each shifted by its own small offset, so that error bars of
// equal length on equal medians (common on a 2-core machine at -cpu 2)
// do not hide each other; every shift stays within a quarter of the
// smallest gap between two -cpu values.
func TestChartDodge(t *testing.T) {
	for _, procs := range [][]int{{1, 2}, {1, 2, 4, 8}} {
		s := &Set{Subjects: []string{"mutex", "striped", "striped/keys=hashed", "atomic", "atomic/clock=coarse", "floor", "xrate"}, Procs: procs}
		seen := map[float64]string{}
		for i, subj := range s.Subjects {
			dx := s.dodge(i)
			if other, dup := seen[dx]; dup {
				t.Errorf("-cpu %v: %s and %s drawn at one x offset %g", procs, other, subj, dx)
			}
			seen[dx] = subj
			assert.LessOrEqual(t, dx, 0.25, "%s", subj)
			assert.GreaterOrEqual(t, dx, -0.25, "%s", subj)
		}
		assert.InDelta(t, 0, s.dodge(0)+s.dodge(len(s.Subjects)-1), 1e-9, "centred on the -cpu value")
	}
}
