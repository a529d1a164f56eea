package inflight

import (
	"sync/atomic"

	"github.com/keyrate/keyrate/internal/isnil"
)

// Slot is one slot of a key's concurrency limit, from an acquire. Release
// it once its request is done. A Slot is a small value, safe to copy; its
// methods are safe for concurrent use. The zero Slot holds nothing.
type Slot struct {
	r   Releaser
	gen uint64
}

// Releaser gives back a slot. It is for implementations of Limiter outside
// this package (redisbucket's); callers use Slot.
type Releaser interface {
	// ReleaseSlot gives back the slot whose token is token, if it is still
	// held under that token, and does nothing otherwise. It must be safe
	// to call any number of times, concurrently.
	ReleaseSlot(token uint64)
}

// NewSlot returns a held Slot that r releases with token. It is for
// implementations of Limiter outside this package; a nil r (or a nil
// pointer, map or func of a Releaser type) gives the zero Slot.
func NewSlot(r Releaser, token uint64) Slot {
	if r == nil || isnil.Is(r) {
		return Slot{}
	}
	return Slot{r: r, gen: token}
}

// Acquired reports whether the acquire that returned s took a slot. It
// stays true after Release: it describes the acquire, not the slot now.
func (s Slot) Acquired() bool { return s.r != nil }

// Release gives the slot back. Only the first Release of a slot, or of any
// copy of it, gives it back; later ones, and Release of the zero Slot, do
// nothing.
func (s Slot) Release() {
	if s.r != nil {
		s.r.ReleaseSlot(s.gen)
	}
}

// holder is what an in-process Slot points to: the key's state it holds a
// slot of, under a generation. A release advances gen from the slot's
// generation by compare-and-swap, so only one release of an acquisition
// succeeds; the holder then goes back to its key's cache (keyState.free)
// or its store's pool, and its next
// acquisition, under the advanced generation, cannot be released by a
// Slot of an earlier one.
type holder struct {
	gen   atomic.Uint64
	state *keyState // written by the acquire that owns gen, before the Slot is returned
	store *Store
}

// ReleaseSlot implements Releaser.
func (h *holder) ReleaseSlot(gen uint64) {
	if !h.gen.CompareAndSwap(gen, gen+1) {
		return // released already, and perhaps reused since
	}
	st, s := h.state, h.store
	h.state = nil
	if !st.free.CompareAndSwap(nil, h) {
		s.pool.Put(h)
	}
	st.release()
}
