package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// CompiledPolicies returns three compiled token-bucket policies of 1, 2
// and 3 windows, on a manual clock at 0: a state s of each window is full
// at every tick from s on. The key tables' tests (internal/flatmap,
// internal/casmap) file their keys under them.
func CompiledPolicies(tb testing.TB) []*rules.Rules {
	tb.Helper()
	c := clock.NewManual(0)
	var out []*rules.Rules
	for n := 1; n <= 3; n++ {
		p := keyrate.Policy{Name: fmt.Sprint("w", n)}
		for i := range n {
			p.Limits = append(p.Limits, keyrate.Limit{Rate: 10 + i, Per: time.Duration(i+1) * time.Second, Burst: 10 + i})
		}
		rs, err := rules.NewRules(p, c)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rs)
	}
	return out
}
