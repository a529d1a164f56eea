package report

import "golang.org/x/perf/benchmath"

// compare is the Mann-Whitney U test of two samples
// (benchmath.AssumeNothing), as every test in the report is made.
//
// The test is symmetric, but go-moremath's implementation of it, which
// benchmath calls, is not on samples of different sizes with ties (and
// go test prints times of 1 µs and more in whole nanoseconds, so ties are
// common): one order can give p = 0 where the other gives the right
// 2/21, and a p can come out above 1. compare runs it both ways and keeps
// the larger p, at most 1, so that no difference is called significant
// on such a p; N1 and N2 stay a's and b's.
func compare(a, b *benchmath.Sample) benchmath.Comparison {
	cmp := benchmath.AssumeNothing.Compare(a, b)
	if rev := benchmath.AssumeNothing.Compare(b, a); rev.P > cmp.P {
		cmp.P = rev.P
		cmp.Warnings = rev.Warnings
	}
	cmp.P = min(cmp.P, 1)
	return cmp
}
