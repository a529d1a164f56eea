package sweep

import (
	"fmt"
	"sync/atomic"

	"github.com/keyrate/keyrate"
)

// Book is a store's key accounting: the number of keys held, against the
// WithMaxKeys cap if there is one, and the counters behind keyrate.Stats.
// Set it up with Init; its methods are safe for concurrent use.
//
// The count is exact against the cap: a slot is reserved (Reserve) before
// a key is inserted and released (Release) when an insertion turns out not
// to be needed or a key is removed, so the keys present never exceed the
// cap, however many goroutines insert at once. The count is one atomic
// word, so Keys is a snapshot of one instant (the maps' own sizes are not:
// xsync sums per-stripe counters one after another, and a striped store
// would lock one stripe at a time), and it never reads above the cap. A
// key counts from its reservation to its removal: a store's Len may
// include a key whose insertion is in flight.
type Book struct {
	max       int64 // the cap; 0 for none
	held      atomic.Int64
	evictions atomic.Uint64
	refused   atomic.Uint64
	full      error // the error a refused request gets, built once
}

// Init sets the cap to max keys; 0 is no cap.
func (b *Book) Init(max int) {
	b.max = int64(max)
	if max > 0 {
		b.full = storeFullError(max)
	}
}

// Capped reports whether the book has a cap.
func (b *Book) Capped() bool { return b.max > 0 }

// Reserve takes one slot for a key about to be inserted, and reports
// whether there was one.
func (b *Book) Reserve() bool {
	if b.max == 0 {
		b.held.Add(1)
		return true
	}
	for {
		n := b.held.Load()
		if n >= b.max {
			return false
		}
		if b.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Full reports whether the book has a cap and every slot is taken.
func (b *Book) Full() bool { return b.max != 0 && b.held.Load() >= b.max }

// Release gives back n slots: keys removed, or reserved and not inserted.
func (b *Book) Release(n int) {
	if n != 0 {
		b.held.Add(-int64(n))
	}
}

// Keys returns the number of keys held: reserved and not yet released.
func (b *Book) Keys() int { return int(b.held.Load()) }

// Evicted counts n evictions.
func (b *Book) Evicted(n int) {
	if n != 0 {
		b.evictions.Add(uint64(n))
	}
}

// Refuse counts a request refused for want of a slot and returns the error
// for it: it wraps keyrate.ErrStoreFull and names the cap.
func (b *Book) Refuse() error {
	b.refused.Add(1)
	return b.full
}

// Stats returns the counters, with Keys as the Keys field.
func (b *Book) Stats() keyrate.Stats {
	return keyrate.Stats{Keys: b.Keys(), Evictions: b.evictions.Load(), Refused: b.refused.Load()}
}

// storeFullError returns the error a store with a cap of max keys returns
// for a new key it cannot track: it wraps ErrStoreFull and names the cap.
// A store builds it once, so that refusing allocates nothing.
func storeFullError(max int) error {
	return fmt.Errorf("%w: it tracks its WithMaxKeys limit of %d keys and none it examined was full again", keyrate.ErrStoreFull, max)
}
