//go:build race

package conformance

// raceEnabled reports a build with the race detector, which the heavy
// checks scale down for.
const raceEnabled = true
