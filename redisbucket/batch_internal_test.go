package redisbucket

import (
	"context"
	"testing"
	"time"
)

// TestBatcherLeave drives batcher.leave through each state a waiter whose
// context ended can be found in, deterministically: queued (it leaves the
// queue, and no turn moves), handed the turn (it hands the turn on: to
// the next queued call, or frees it), and taken into a pipeline (its
// arguments are not to be reused unless its reply is in). A turn lost or
// duplicated here would show in inflight.
func TestBatcherLeave(t *testing.T) {
	b := newBatcher(1, 16, newDeadlines(time.Second), nil)
	newWaiter := func() *waiter {
		return &waiter{ctx: context.Background(), wake: make(chan struct{}, 1)}
	}
	check := func(what string, queued, inflight int) {
		t.Helper()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.queue) != queued || b.inflight != inflight {
			t.Fatalf("%s: %d queued and %d in flight; want %d and %d", what, len(b.queue), b.inflight, queued, inflight)
		}
	}
	if !b.take(nil) {
		t.Fatal("the first take found no free turn")
	}
	w1, w2 := newWaiter(), newWaiter()
	if b.take(w1) || b.take(w2) {
		t.Fatal("a take found a free turn with the one turn taken")
	}
	check("two queued", 2, 1)

	// Queued: w2 leaves the queue; the turn stays where it is.
	if woken, reuse := b.leave(w2); woken || !reuse {
		t.Fatalf("leave(queued) = %v, %v; want false, true", woken, reuse)
	}
	check("the queued call left", 1, 1)

	// Handed the turn as its context ended: w1 hands it on, and, the
	// queue empty, frees it.
	b.release()
	if w1.state != leading {
		t.Fatalf("release handed the turn, w1's state is %v; want leading", w1.state)
	}
	if woken, reuse := b.leave(w1); woken || !reuse {
		t.Fatalf("leave(leading) = %v, %v; want false, true", woken, reuse)
	}
	check("the call handed the turn left", 0, 0)

	// Handed the turn, with another queued: the turn goes to it.
	if !b.take(nil) {
		t.Fatal("no free turn after every call left")
	}
	w3, w4 := newWaiter(), newWaiter()
	b.take(w3)
	b.take(w4)
	b.release()
	if woken, reuse := b.leave(w3); woken || !reuse {
		t.Fatalf("leave(leading) = %v, %v; want false, true", woken, reuse)
	}
	if w4.state != leading {
		t.Fatalf("the turn w3 left went to no one: w4's state is %v; want leading", w4.state)
	}
	check("the turn handed on", 0, 1)
	<-w4.wake

	// Taken into a pipeline: without its reply, the command may still be
	// being written (no reuse); with it, the call reads it (woken).
	w5 := newWaiter()
	w5.state = taken
	if woken, reuse := b.leave(w5); woken || reuse {
		t.Fatalf("leave(taken, no reply) = %v, %v; want false, false", woken, reuse)
	}
	w6 := newWaiter()
	w6.state = taken
	w6.wake <- struct{}{}
	if woken, reuse := b.leave(w6); !woken || !reuse {
		t.Fatalf("leave(taken, replied) = %v, %v; want true, true", woken, reuse)
	}
	b.release()
	check("every turn ended", 0, 0)
}
