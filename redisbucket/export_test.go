package redisbucket

import "github.com/keyrate/keyrate"

// MaxBurst returns the largest Burst New accepts at l's Rate and Per.
func MaxBurst(l keyrate.Limit) int {
	u, err := compileUnits(l.WithBurst(1))
	if err != nil {
		panic(err)
	}
	return int(maxFill / u.interval)
}

// MaxMicros is the latest time the script reads, in µs.
const MaxMicros = maxMicros

// ScriptUnits returns l's ticks per µs, ticks per token and ticks to fill
// in the script's units.
func ScriptUnits(l keyrate.Limit) (k, interval, fill int64) {
	u, err := compileUnits(l)
	if err != nil {
		panic(err)
	}
	return u.k, u.interval, u.fill
}

// Pipelined returns how many calls wait in s's WithPipelining queue and
// how many turns are taken (calls or pipelines in flight).
func Pipelined(s *Store) (queued, inflight int) {
	b := s.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.inflight
}
