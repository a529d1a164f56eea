package redisbucket

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeadlineSlots: a call's context reports its own deadline, exactly;
// its Done channel is a slot's that closes at or after that deadline and
// at most the granularity later; calls whose deadlines are that close
// share a slot, and a later one gets a new slot; Err is nil until the
// slot closes, then context.DeadlineExceeded. A parent that can be
// cancelled gets context.WithTimeout's context instead.
func TestDeadlineSlots(t *testing.T) {
	ds := newDeadlines(time.Hour) // no slot closes during the test
	if ds.gran != time.Millisecond {
		t.Fatalf("granularity %v for a timeout of an hour; want 1ms", ds.gran)
	}
	if g := newDeadlines(8 * time.Microsecond).gran; g != time.Microsecond {
		t.Fatalf("granularity %v for a timeout of 8µs; want 1µs", g)
	}
	if g := newDeadlines(time.Nanosecond).gran; g != time.Nanosecond {
		t.Fatalf("granularity %v for a timeout of 1ns; want 1ns", g)
	}
	d := time.Now().Add(time.Hour)
	a := ds.slotFor(d)
	if a.end.Before(d) || a.end.Sub(d) > ds.gran {
		t.Fatalf("slot ends %v after the deadline; want from 0 to %v", a.end.Sub(d), ds.gran)
	}
	for _, later := range []time.Duration{0, time.Nanosecond, ds.gran / 2, a.end.Sub(d)} {
		if b := ds.slotFor(d.Add(later)); b != a {
			t.Errorf("a deadline %v later got a new slot; want the shared one, which ends %v after the first", later, a.end.Sub(d))
		}
	}
	b := ds.slotFor(a.end.Add(time.Nanosecond))
	if b == a || b.end.Before(a.end.Add(time.Nanosecond)) {
		t.Fatalf("a deadline past the slot's end got a slot ending %v after the first's end", b.end.Sub(a.end))
	}
	if c := ds.slotFor(d.Add(-time.Minute)); c == a || c == b || c.end.Before(d.Add(-time.Minute)) || c.end.After(d.Add(-time.Minute+ds.gran)) {
		t.Fatalf("an earlier deadline got a slot ending %v after it", c.end.Sub(d.Add(-time.Minute)))
	}

	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	ctx, cancel := ds.with(parent)
	defer cancel()
	tc, ok := ctx.(*timeoutCtx)
	if !ok {
		t.Fatalf("with(a context that is never cancelled) = %T; want *timeoutCtx", ctx)
	}
	if dl, ok := ctx.Deadline(); !ok || dl != tc.deadline || time.Until(dl) > time.Hour {
		t.Fatalf("Deadline() = %v, %v; want the call's own, at most an hour away", dl, ok)
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("the call's context lost its parent's value")
	}
	if ctx.Err() != nil {
		t.Fatalf("Err() = %v before the slot closed", ctx.Err())
	}
	close(tc.slot.done) // as its timer would
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v after the slot closed; want context.DeadlineExceeded", ctx.Err())
	}

	cctx, stop := context.WithCancel(context.Background())
	ctx, cancel = ds.with(cctx)
	if _, ok := ctx.(*timeoutCtx); ok {
		t.Fatal("with(a cancellable context) is a *timeoutCtx, which would not see the parent's cancel")
	}
	stop()
	<-ctx.Done()
	cancel()
}

// TestDeadlineSlotCloses: a slot's channel closes by itself once its end
// has passed (with a 1µs timeout, at once).
func TestDeadlineSlotCloses(t *testing.T) {
	ctx, cancel := newDeadlines(time.Microsecond).with(context.Background())
	defer cancel()
	<-ctx.Done() // the test would hang here if the slot's timer never fired
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v; want context.DeadlineExceeded", ctx.Err())
	}
}
