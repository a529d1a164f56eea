package inflight_test

import (
	"testing"

	"github.com/keyrate/keyrate/inflight"
)

// countingReleaser is a Releaser whose method needs its receiver.
type countingReleaser struct{ n int }

func (c *countingReleaser) ReleaseSlot(uint64) { c.n++ }

// TestNewSlotTypedNil: NewSlot of a nil Releaser of a pointer type (a
// typed nil, as a Limiter outside the package may pass) is the zero Slot,
// as a nil one is: not acquired, and its Release does nothing, instead of
// calling the method on a nil receiver and panicking.
func TestNewSlotTypedNil(t *testing.T) {
	var r *countingReleaser
	s := inflight.NewSlot(r, 7)
	if s.Acquired() {
		t.Fatal("NewSlot(typed nil) is acquired; want the zero Slot")
	}
	s.Release() // must not panic
	live := &countingReleaser{}
	s = inflight.NewSlot(live, 7)
	s.Release()
	if !s.Acquired() || live.n != 1 {
		t.Fatalf("NewSlot(live): acquired %v, released %d times; want true, 1", s.Acquired(), live.n)
	}
}
