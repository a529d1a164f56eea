//go:build race

package racetest

// Enabled reports whether the race detector is on (a build with -race).
const Enabled = true
