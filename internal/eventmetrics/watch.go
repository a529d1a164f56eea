package eventmetrics

import (
	"fmt"
	"sync"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/isnil"
)

// Stater is what a Watch reads: the in-process stores (every
// keyrate.BoundedLimiter) are Staters.
type Stater interface {
	Stats() keyrate.Stats
}

// Watch is the store an exporter watches for its keys, evictions and
// refusals, and the evictions and refusals the stores watched so far
// counted while they were watched: totals that never go backwards, as a
// counter must not, when a later Set replaces the store. The zero Watch
// watches nothing; it is safe for concurrent use.
type Watch struct {
	mu                  sync.Mutex
	w                   *watched
	evictions, refusals uint64
}

// watched is the store a Watch watches, and its Stats counts as last
// read, from which the next reading's increase is counted.
type watched struct {
	s                Stater
	evicted, refused uint64
}

// Set makes s the store watched, from now on: what s counted before is
// not counted. The store it replaces is read once more, so that what it
// counted since the last Read stays in the totals. A nil s stops
// watching; a typed nil, whose Stats would panic at the next Read, is
// refused with an error and changes nothing.
func (w *Watch) Set(s Stater) error {
	if s != nil && isnil.Is(s) {
		return fmt.Errorf("a nil %T", s)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.w; old != nil {
		w.add(old, old.s.Stats())
	}
	w.w = nil
	if s != nil {
		st := s.Stats()
		w.w = &watched{s: s, evicted: st.Evictions, refused: st.Refused}
	}
	return nil
}

// Read reads the watched store's Stats and returns the keys it tracks and
// the evictions and refusals totals; ok is false, and the rest zero, when
// no store is watched.
func (w *Watch) Read() (keys int, evictions, refusals uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		return 0, 0, 0, false
	}
	st := w.w.s.Stats()
	w.add(w.w, st)
	return st.Keys, w.evictions, w.refusals, true
}

// add adds to the totals what st counts beyond ws's last reading, and
// makes st the last reading. A count below the last (a Stater whose
// counts restarted) is all new.
func (w *Watch) add(ws *watched, st keyrate.Stats) {
	w.evictions += increase(st.Evictions, &ws.evicted)
	w.refusals += increase(st.Refused, &ws.refused)
}

// increase returns what now counts beyond *last, and sets *last to now.
func increase(now uint64, last *uint64) uint64 {
	d := now - *last
	if now < *last {
		d = now
	}
	*last = now
	return d
}
