package conformance

import (
	"time"

	"github.com/keyrate/keyrate"
)

// LogModel is the plain reference of keyrate.SlidingLog for one key: the
// list of its admissions (tick, cost), decided by the rule (allowed
// iff the cost admitted in (t − W, t] plus c is at most N) by summing the
// list, with the derived figures found by trying every tick at which an
// admission leaves the window. It shares no arithmetic with keyrate's ring.
// Time is in ticks of 1ns from the store's epoch.
//
// As the stores do, it decides a reading older than the latest it has seen
// at that latest one (te), and logs an admission at te (or at the newest
// entry's tick, if later).
type LogModel struct {
	N, W    int64
	te      int64
	entries []logEntry
}

type logEntry struct{ at, cost int64 }

// NewLogModel returns the model of an empty key under limit l, a
// SlidingLog limit.
func NewLogModel(l keyrate.Limit) *LogModel {
	return &LogModel{N: int64(l.Rate), W: int64(l.Per)}
}

// used returns the cost admitted in (t − W, t] (entries past t included).
func (m *LogModel) used(t int64) int64 {
	var sum int64
	for _, e := range m.entries {
		if e.at+m.W > t {
			sum += e.cost
		}
	}
	return sum
}

// Allows reports whether a request of cost c at tick t is allowed.
func (m *LogModel) Allows(t, c int64) bool { return m.used(max(t, m.te))+c <= m.N }

// Take decides a request of cost c at t, logging it if allowed.
func (m *LogModel) Take(t, c int64) bool {
	m.te = max(m.te, t)
	if m.used(m.te)+c > m.N {
		return false
	}
	at := m.te
	if n := len(m.entries); n > 0 {
		at = max(at, m.entries[n-1].at)
	}
	m.entries = append(m.entries, logEntry{at, c})
	return true
}

// Refund takes c back off the newest admissions within the window at t.
func (m *LogModel) Refund(t, c int64) {
	m.te = max(m.te, t)
	for i := len(m.entries) - 1; i >= 0 && c > 0; i-- {
		e := &m.entries[i]
		if e.at+m.W <= m.te {
			break
		}
		back := min(c, e.cost)
		e.cost -= back
		c -= back
	}
	for len(m.entries) > 0 && m.entries[len(m.entries)-1].cost == 0 {
		m.entries = m.entries[:len(m.entries)-1]
	}
}

// Earliest returns the earliest tick at or after t (and the latest reading
// seen) at which a request of cost c is allowed if nothing else spends.
func (m *LogModel) Earliest(t, c int64) int64 {
	best := int64(-1)
	for _, u := range append([]int64{max(t, m.te)}, m.exits()...) {
		if u >= max(t, m.te) && m.used(u)+c <= m.N && (best < 0 || u < best) {
			best = u
		}
	}
	return best
}

// exits returns the ticks at which the admissions leave the window.
func (m *LogModel) exits() []int64 {
	out := make([]int64, len(m.entries))
	for i, e := range m.entries {
		out[i] = e.at + m.W
	}
	return out
}

// Remaining returns the largest cost allowed at t.
func (m *LogModel) Remaining(t int64) int64 { return m.N - min(m.used(max(t, m.te)), m.N) }

// FullAt returns the tick from which the key is as a new one: when its
// newest admission has left the window, and not before the latest reading
// it has seen.
func (m *LogModel) FullAt() int64 {
	if n := len(m.entries); n > 0 {
		return max(m.te, m.entries[n-1].at+m.W)
	}
	return m.te
}

// Decide returns the Decision a store gives for a request of cost c at t
// that was allowed or not, after it (the caller fills Policy and Limit).
func (m *LogModel) Decide(t, c int64, allowed bool) keyrate.Decision {
	d := keyrate.Decision{Allowed: allowed, Remaining: int(m.Remaining(t))}
	d.ResetAfter = time.Duration(max(0, m.FullAt()-t))
	d.WindowResetAfter = d.ResetAfter
	if !allowed {
		d.RetryAfter = time.Duration(m.Earliest(t, c) - t)
	}
	return d
}
