package multi

import (
	"runtime"
	"sync/atomic"

	"github.com/keyrate/keyrate/internal/layout"
)

// Refunds keeps an undo from being fooled by a refund (see AllowAll). An
// undo puts a key's old state back if the word still holds what the spend
// wrote; that is exact when everything that ran on the word in between
// added and took back exact amounts (spends, Cancel, other undos), but a
// refund can give back less than its cost (a bucket can hold no more than
// its Burst), and a spend after it can bring the word back to what the
// spend wrote with a token fewer in hand than the undo then puts back: it
// would mint it. So an AllowAll undoes its spends only if no refund ran
// on the store from its start to its undo (any refund, on any key: they
// are rare, and the price of one is a kept spend, an over-denial until
// the key refills), and a refund waits for the undos in flight (each a
// compare-and-swap or a short locked step) before it writes.
//
// The protocol, with sequentially consistent atomics: a refund adds to
// begun, waits until undoing is zero, writes, and adds to ended; an
// AllowAll reads begun then ended before its first spend and may undo
// only if they were equal (no refund in progress); each undo adds to
// undoing, reads begun again, and puts back the old state only if begun
// has not moved. Either the refund's add comes first, and the undo sees
// it, or the undo's add to undoing does, and the refund sees it and
// writes after the undo.
//
// Refund calls Begin before it takes any lock and End after it has
// released them, so that its wait can wait for nothing it holds.
type Refunds struct {
	_       [layout.CacheLine]byte
	begun   atomic.Uint64 // written by refunds, read by every AllowAll
	ended   atomic.Uint64
	_       [layout.CacheLine - 16]byte
	undoing atomic.Int64 // written by undos, read by refunds
	_       [layout.CacheLine - 8]byte
}

// Begin marks a refund's start: undos that have not read begun yet will
// not put back a state, and those that have finish before it returns.
func (g *Refunds) Begin() {
	g.begun.Add(1)
	for g.undoing.Load() != 0 {
		runtime.Gosched()
	}
}

// End marks a refund's end, after its write.
func (g *Refunds) End() { g.ended.Add(1) }

// mark is what an AllowAll reads before its first spend: the refunds
// begun, and whether none was in progress.
func (g *Refunds) mark() (begun uint64, quiet bool) {
	b := g.begun.Load()
	return b, g.ended.Load() == b
}

// undo puts back the spends of sp through s, each only if no refund has
// begun since mark returned begun (and none was in progress then: quiet).
func undo[R any, S Store[R]](g *Refunds, s S, begun uint64, quiet bool, sp []Spend[R]) {
	if !quiet || len(sp) == 0 {
		return
	}
	g.undoing.Add(1)
	for i := range sp {
		if g.begun.Load() != begun {
			break
		}
		s.Undo(sp[i])
	}
	g.undoing.Add(-1)
}
