package inflight_test

import (
	"context"
	"errors"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/inflight"
)

// TestReserved: with 1 of 3 slots reserved, acquires that are not
// critical fill 2; critical ones (TryAcquireCritical, a context marked
// Critical, Acquire with one) fill the third; none fills a fourth.
func TestReserved(t *testing.T) {
	s, err := inflight.New(3, inflight.WithReserved(1))
	if err != nil {
		t.Fatal(err)
	}
	crit := inflight.Critical(context.Background())
	try := func(name string, f func() (inflight.Slot, error), want bool) inflight.Slot {
		t.Helper()
		sl, err := f()
		if err != nil || sl.Acquired() != want {
			t.Fatalf("%s: %v, %v; want %v", name, sl.Acquired(), err, want)
		}
		return sl
	}
	normal := func() (inflight.Slot, error) { return s.TryAcquire("k") }
	normalCtx := func() (inflight.Slot, error) { return s.TryAcquireContext(context.Background(), "k") }
	critical := func() (inflight.Slot, error) { return s.TryAcquireCritical("k") }
	criticalCtx := func() (inflight.Slot, error) { return s.TryAcquireContext(crit, "k") }
	a := try("normal 1", normal, true)
	b := try("normal 2", normalCtx, true)
	try("normal 3 (the reserve)", normal, false)
	try("normal 3 by context", normalCtx, false)
	c := try("critical 3", critical, true)
	try("critical 4", criticalCtx, false)
	c.Release()
	c = try("critical 3 by context", criticalCtx, true)
	c.Release()
	c = try("Acquire critical 3", func() (inflight.Slot, error) { return s.Acquire(crit, "k") }, true)
	for _, sl := range []inflight.Slot{a, b, c} {
		sl.Release()
	}
	if got := s.Limit(); got != 3 {
		t.Errorf("Limit() = %d, want 3", got)
	}
	if inflight.IsCritical(context.Background()) || !inflight.IsCritical(crit) {
		t.Error("IsCritical does not tell a marked context")
	}
}

// TestReservedBadOption: a reserve outside [0, n) is an error wrapping
// keyrate.ErrInvalidOption that names it.
func TestReservedBadOption(t *testing.T) {
	for _, r := range []int{-1, 2, 3} {
		if _, err := inflight.New(2, inflight.WithReserved(r)); !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("New(2, WithReserved(%d)): %v, want ErrInvalidOption", r, err)
		}
	}
	if _, err := inflight.New(2, inflight.WithReserved(1), nil); err != nil {
		t.Errorf("New(2, WithReserved(1), nil): %v", err)
	}
}

// TestCriticalNilContext: a nil context is bad input, not a panic:
// IsCritical(nil) is false, and Critical(nil) marks a background context,
// whose acquire may take the reserve.
func TestCriticalNilContext(t *testing.T) {
	var nilCtx context.Context
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("IsCritical(nil) panicked: %v", r)
			}
		}()
		if inflight.IsCritical(nilCtx) {
			t.Error("IsCritical(nil) = true")
		}
	}()
	var crit context.Context
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Critical(nil) panicked: %v", r)
			}
		}()
		crit = inflight.Critical(nilCtx)
	}()
	if crit == nil || !inflight.IsCritical(crit) {
		t.Fatalf("Critical(nil) = %v, want a context marked critical", crit)
	}
	s, err := inflight.New(2, inflight.WithReserved(1))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := s.TryAcquire("k"); !a.Acquired() {
		t.Fatal("ordinary 1 refused")
	}
	if b, err := s.TryAcquireContext(crit, "k"); err != nil || !b.Acquired() {
		t.Errorf("critical 2 with Critical(nil)'s context: %v, %v; want the reserved slot", b.Acquired(), err)
	}
}
