package multi

import (
	"runtime"
	"testing"

	"github.com/keyrate/keyrate/internal/rules"
)

// fakeStore records undos and runs onUndo inside each.
type fakeStore struct {
	g      Refunds
	undone []int
	onUndo func(i int)
}

func (f *fakeStore) SpendKnown(string, *rules.Rules, uint64, int) (Spend[int], bool, bool) {
	return Spend[int]{}, false, false
}
func (f *fakeStore) LoadKnown(string, *rules.Rules) (rules.State, bool) { return 0, false }
func (f *fakeStore) Refunds() *Refunds                                  { return &f.g }
func (f *fakeStore) Undo(sp Spend[int]) bool {
	f.undone = append(f.undone, sp.Ref)
	if f.onUndo != nil {
		f.onUndo(sp.Ref)
	}
	return true
}

func spends(n int) []Spend[int] {
	sp := make([]Spend[int], n)
	for i := range sp {
		sp[i].Ref = i
	}
	return sp
}

// TestUndoAfterRefund: an undo puts nothing back once a refund has begun
// since the mark, or when one was in progress at the mark; with none, it
// puts back every spend.
func TestUndoAfterRefund(t *testing.T) {
	f := &fakeStore{}
	b, quiet := f.g.mark()
	undo(&f.g, f, b, quiet, spends(2))
	if len(f.undone) != 2 {
		t.Fatalf("no refund: undid %v, want [0 1]", f.undone)
	}

	f = &fakeStore{}
	b, quiet = f.g.mark()
	f.g.Begin()
	f.g.End()
	undo(&f.g, f, b, quiet, spends(2))
	if len(f.undone) != 0 {
		t.Fatalf("a refund between the mark and the undo: undid %v, want none", f.undone)
	}

	f = &fakeStore{}
	f.g.Begin() // in progress at the mark
	b, quiet = f.g.mark()
	undo(&f.g, f, b, quiet, spends(2))
	f.g.End()
	if quiet || len(f.undone) != 0 {
		t.Fatalf("a refund in progress at the mark: quiet %v, undid %v, want false and none", quiet, f.undone)
	}
}

// TestRefundWaitsForUndo: a refund that begins while an undo is putting
// back a state does not return from Begin (and so does not write) until
// the undo is done, and the undo puts back no further spend once the
// refund has begun.
func TestRefundWaitsForUndo(t *testing.T) {
	f := &fakeStore{}
	begun := make(chan struct{})
	f.onUndo = func(i int) {
		if i != 0 {
			return
		}
		go func() {
			f.g.Begin()
			close(begun)
			f.g.End()
		}()
		for f.g.begun.Load() == 0 { // the refund has added to begun
			runtime.Gosched()
		}
		select {
		case <-begun:
			t.Error("a refund's Begin returned while an undo was in progress")
		default:
		}
	}
	b, quiet := f.g.mark()
	undo(&f.g, f, b, quiet, spends(3))
	<-begun
	if len(f.undone) != 1 {
		t.Fatalf("undid %v; want [0]: the refund began during the first undo", f.undone)
	}
}
