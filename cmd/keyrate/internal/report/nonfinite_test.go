package report

import (
	"io"
	"math"
	"strings"
	"testing"
)

// TestReadNonFiniteValue: a value that is not a finite number (NaN, +Inf:
// a benchmark's ReportMetric of 0/0, a hand-edited or corrupted file)
// does not reach the statistics: with a NaN in a sample, benchmath's
// Mann-Whitney U test (go-moremath's) never returns, and "keyrate report"
// would hang forever on such a file. Read lists the line in Warnings, with
// its file and line number (the report's "Lines skipped"), and keeps the
// rest.
func TestReadNonFiniteValue(t *testing.T) {
	for _, bad := range []string{"NaN", "+Inf", "-Inf"} {
		t.Run("value="+bad, func(t *testing.T) {
			in := lines("store=atomic/wl=hotkey", 1, 10, 100, 0) +
				"BenchmarkAllow/store=atomic/wl=hotkey \t1000\t" + bad + " ns/op\t0 B/op\t0 allocs/op\n" +
				lines("store=atomic/policy=2windows/wl=hotkey", 1, 10, 130, 0)
			s, err := Read(strings.NewReader(in), "bad.txt")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "bad.txt:11:") || !strings.Contains(s.Warnings[0], bad+" ns/op") {
				t.Fatalf("Warnings = %q, want one naming bad.txt:11 and %s ns/op", s.Warnings, bad)
			}
			c := allow("atomic", "hotkey", 1, unitNs)
			if v := s.values[c]; len(v) != 10 {
				t.Fatalf("%d values of %v, want the 10 finite ones", len(v), c)
			}
			for _, v := range s.values[c] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("value %v kept", v)
				}
			}
			Markdown(io.Discard, s) // finishes: the U tests see no NaN
		})
	}
}
