// Package racetest tells keyrate's tests and benchmarks whether the race
// detector is on, so that they can scale their work down under it, and
// prints the line that says what benchmark figures under it are worth.
package racetest

import (
	"flag"
	"fmt"
	"sync"
)

// Notice is the line Bench prints under the race detector.
const Notice = "race detector on: the benchmark figures below are not performance numbers " +
	"(every memory access is instrumented, 20-50x slower, and key counts are scaled down); " +
	"measure with `make report`"

var noticeOnce sync.Once

// Bench prints Notice once per test binary when the race detector is on,
// and nothing otherwise. Every Benchmark function calls it first, so that
// the line comes before the first figure whichever benchmarks -bench
// selects.
func Bench() {
	if Enabled {
		noticeOnce.Do(func() { fmt.Println(Notice) })
	}
}

// BenchTime is the -benchtime of a package whose TestMain calls
// SetBenchTime, under the race detector: its figures mean nothing there,
// and a second for each of dozens of benchmarks would make
// "go test -race -bench . ./..." take minutes.
const BenchTime = "100ms"

// SetBenchTime, called from TestMain before m.Run, sets -test.benchtime to
// BenchTime under the race detector unless the command line gave one. It
// does nothing without the race detector.
func SetBenchTime() {
	if !Enabled {
		return
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.benchtime" })
	if !given {
		if err := flag.Set("test.benchtime", BenchTime); err != nil {
			panic(err)
		}
	}
}
