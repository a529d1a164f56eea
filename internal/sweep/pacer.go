package sweep

import "sync/atomic"

// Pacing constants. A sweep examines every key once, so sweeping after as
// many new-key events as there were keys left by the previous sweep costs
// amortised O(1) per event, the way Go's garbage collector paces itself
// (GOGC=100).
const (
	// MinPace is the fewest events between two paced sweeps of a store
	// without a cap, so that a small store is not swept on every insert.
	MinPace = 1024
	// RefusalWeight is what a request refused by a full store counts for,
	// against an insertion's 1: a full store sweeps after a sixteenth as
	// many refusals as it holds keys, examining amortised 16 keys per
	// refusal, so that keys that have become idle free their slots soon,
	// while an attacker streaming new keys into a full store of busy keys
	// buys at most 16 key examinations per request.
	RefusalWeight = 16
	// AssistRatio is how many periods a paced sweep that runs on its own
	// goroutine may fall behind before the goroutines charging events wait
	// for it (Overdue).
	AssistRatio = 1
)

// Pacer decides when a call on the request path pays for a sweep: after
// enough events (insertions of new keys, and refusals weighted by
// RefusalWeight) since the last sweep. Set it up with Init; it is safe for
// concurrent use.
type Pacer struct {
	min    int64
	debt   atomic.Int64 // events since the last sweep
	budget atomic.Int64 // events allowed before the next: the keys the last sweep left
	busy   atomic.Bool  // a paced sweep is running
}

// Init sets the fewest events between paced sweeps to min (at least 1).
func (p *Pacer) Init(min int) { p.min = max(int64(min), 1) }

// Charge adds w events and reports whether a sweep is now due. When it
// returns true the caller owns the sweep: it must sweep and then call
// Swept. While one paced sweep runs, Charge reports false to everyone else.
func (p *Pacer) Charge(w int) bool {
	if p.debt.Add(int64(w)) < max(p.min, p.budget.Load()) {
		return false
	}
	return p.busy.CompareAndSwap(false, true)
}

// Overdue reports whether a paced sweep is running and the events since
// the last one have reached AssistRatio times the period.
func (p *Pacer) Overdue() bool {
	return p.busy.Load() && p.debt.Load() >= AssistRatio*max(p.min, p.budget.Load())
}

// Reset starts a new period after a sweep (paced or not) that left keys.
func (p *Pacer) Reset(keys int) {
	p.budget.Store(int64(keys))
	p.debt.Store(0)
}

// Swept ends a paced sweep that Charge handed to the caller.
func (p *Pacer) Swept() { p.busy.Store(false) }
