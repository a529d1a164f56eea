//go:build race

package bench

// raceEnabled reports whether the race detector is on: the benchmarks then
// scale their key counts down (see maxKeys).
const raceEnabled = true
