package bench

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// progressOn is the -progress flag, which bench/run.sh sets.
var progressOn = flag.Bool("progress", false, "print a progress line before each sub-benchmark")

// A leaf is one sub-benchmark a benchmark function runs.
type leaf struct {
	name string
	run  func(b *testing.B)
}

// runLeaves runs leaves as sub-benchmarks of b. Under -progress it prints,
// as each begins, a line saying which it is, how far through b's list it
// is, the time since b began and an estimate of the time left (the mean
// so far times the number left; a sub-benchmark runs for every -count and
// -cpu value before the next begins). The line begins with "# progress",
// which the benchmark format ignores and bench/run.sh shows on the
// terminal only. It is printed by the sub-benchmark's first call, before
// the testing package prints its name, so never inside a result line; a
// sub-benchmark that -bench leaves out prints none.
func runLeaves(b *testing.B, leaves []leaf) {
	start := time.Now()
	for i, l := range leaves {
		first := true
		b.Run(l.name, func(b *testing.B) {
			if first && *progressOn {
				elapsed := time.Since(start)
				left := "estimating the time left"
				if i > 0 {
					left = "about " + fmtDuration(elapsed/time.Duration(i)*time.Duration(len(leaves)-i)) + " left in this benchmark"
				}
				fmt.Printf("# progress [%d/%d] %s: %s elapsed, %s\n", i+1, len(leaves), b.Name(), fmtDuration(elapsed), left)
			}
			first = false
			l.run(b)
		})
	}
}

// fmtDuration is d as minutes and seconds, 1m05s, or seconds below a
// minute, 42s.
func fmtDuration(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}
