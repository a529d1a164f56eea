package redisbucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newWaiter returns a queued call on node with a background context.
func newWaiter(node *redis.Client) *waiter {
	return &waiter{ctx: context.Background(), node: node, wake: make(chan struct{}, 1)}
}

// checkCounts fails t unless b holds queued calls, inflight turns taken
// and the turns of servers servers of several.
func checkCounts(t *testing.T, b *batcher, what string, queued, inflight, servers int) {
	t.Helper()
	q, f, n := b.counts()
	if q != queued || f != inflight || n != servers {
		t.Fatalf("%s: %d queued, %d in flight, turns of %d servers; want %d, %d and %d", what, q, f, n, queued, inflight, servers)
	}
}

// TestBatcherLeave drives batcher.leave through each state a waiter whose
// context ended can be found in, deterministically: queued (it leaves the
// queue, and no turn moves), handed the turn (it hands the turn on: to
// the next queued call, or frees it), and taken into a pipeline (its
// arguments are not to be reused unless its reply is in). A turn lost or
// duplicated here would show in inflight. It does so for the one server
// of a plain client (node nil) and for one server of several, whose
// turns are dropped when its last call ends.
func TestBatcherLeave(t *testing.T) {
	for _, c := range []struct {
		name string
		node *redis.Client
	}{{"one", nil}, {"several", new(redis.Client)}} {
		t.Run("servers="+c.name, func(t *testing.T) {
			b := newBatcher(1, 16, newDeadlines(time.Second), nil)
			node := c.node
			if node != nil {
				b.nodes = make(map[*redis.Client]turns) // as for a Cluster's client
			}
			check := func(what string, queued, inflight int) {
				t.Helper()
				servers := 0 // the server's turns kept while, and only while, it has calls
				if node != nil && inflight > 0 {
					servers = 1
				}
				checkCounts(t, b, what, queued, inflight, servers)
			}
			if !b.take(node, nil) {
				t.Fatal("the first take found no free turn")
			}
			w1, w2 := newWaiter(node), newWaiter(node)
			if b.take(node, w1) || b.take(node, w2) {
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
			b.release(node)
			if w1.state != leading {
				t.Fatalf("release handed the turn, w1's state is %v; want leading", w1.state)
			}
			if woken, reuse := b.leave(w1); woken || !reuse {
				t.Fatalf("leave(leading) = %v, %v; want false, true", woken, reuse)
			}
			check("the call handed the turn left", 0, 0)

			// Handed the turn, with another queued: the turn goes to it.
			if !b.take(node, nil) {
				t.Fatal("no free turn after every call left")
			}
			w3, w4 := newWaiter(node), newWaiter(node)
			b.take(node, w3)
			b.take(node, w4)
			b.release(node)
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
			w5 := newWaiter(node)
			w5.state = taken
			if woken, reuse := b.leave(w5); woken || reuse {
				t.Fatalf("leave(taken, no reply) = %v, %v; want false, false", woken, reuse)
			}
			w6 := newWaiter(node)
			w6.state = taken
			w6.wake <- struct{}{}
			if woken, reuse := b.leave(w6); !woken || !reuse {
				t.Fatalf("leave(taken, replied) = %v, %v; want true, true", woken, reuse)
			}
			b.release(node)
			check("every turn ended", 0, 0)
		})
	}
}

// TestBatcherServers: the turns and queues of a client of several servers
// are each server's: with one turn, a call to server A in flight and
// another queued behind it, a call to B takes B's turn at once; a turn
// that ends goes to the oldest call of its own server, never to
// another's (the call queued for B, and none for A: A's freed turn is
// not B's); and a server's turns are dropped when its last call ends
// (leaving none for a server a reshard took away), whether that call
// went straight out or was handed a turn, and added again when a call
// comes.
func TestBatcherServers(t *testing.T) {
	b := newBatcher(1, 16, newDeadlines(time.Second), nil)
	b.nodes = make(map[*redis.Client]turns) // as for a Cluster's client
	a, bb := new(redis.Client), new(redis.Client)
	if !b.take(a, nil) {
		t.Fatal("the first call to A found no free turn")
	}
	wa := newWaiter(a)
	if b.take(a, wa) {
		t.Fatal("a second call to A found a free turn with A's one turn taken")
	}
	if !b.take(bb, nil) {
		t.Fatal("a call to B found no free turn with A's taken: B waits for A")
	}
	checkCounts(t, b, "A: one in flight, one queued; B: one in flight", 1, 2, 2)
	wb := newWaiter(bb)
	if b.take(bb, wb) {
		t.Fatal("a second call to B found a free turn with B's one turn taken")
	}

	b.release(a) // A's turn goes to A's queued call, not to B's
	if wa.state != leading || wb.state != queued {
		t.Fatalf("A's freed turn: A's waiter %v, B's %v; want leading and queued", wa.state, wb.state)
	}
	<-wa.wake
	checkCounts(t, b, "A's turn handed on", 1, 2, 2)
	b.release(a) // A's last call ends: A's turns go
	checkCounts(t, b, "A idle", 1, 1, 1)
	if _, ok := b.nodes[a]; ok {
		t.Fatal("A's turns kept after its last call ended")
	}

	b.release(bb)
	if wb.state != leading {
		t.Fatalf("B's freed turn: B's waiter %v; want leading", wb.state)
	}
	<-wb.wake
	if !b.take(a, nil) { // A is back
		t.Fatal("a call to A, idle, found no free turn")
	}
	checkCounts(t, b, "A back, B's handed-on turn in flight", 0, 2, 2)
	b.release(bb)
	b.release(a)
	checkCounts(t, b, "every call ended", 0, 0, 0)
}

// TestBatcherTurnAllocs: a call that finds a free turn takes and ends it
// without allocating, on one server and on servers of several coming and
// going (each call to a server with none in flight adds its turns, and
// the end of its last call drops them), as the store's allocation tests
// count on.
func TestBatcherTurnAllocs(t *testing.T) {
	one := newBatcher(2, 16, newDeadlines(time.Second), nil)
	several := newBatcher(2, 16, newDeadlines(time.Second), nil)
	several.nodes = make(map[*redis.Client]turns)
	nodes := make([]*redis.Client, 12) // more than a small map's 8
	for i := range nodes {
		nodes[i] = new(redis.Client)
	}
	for _, n := range nodes { // the map's table grown once
		several.take(n, nil)
	}
	for _, n := range nodes {
		several.release(n)
	}
	for _, c := range []struct {
		name string
		b    *batcher
		call func(i int) *redis.Client
	}{
		{"one", one, func(int) *redis.Client { return nil }},
		{"several", several, func(i int) *redis.Client { return nodes[i%len(nodes)] }},
	} {
		i := 0
		failed := ""
		n := testing.AllocsPerRun(1000, func() {
			node, other := c.call(i), c.call(i+1)
			i++
			if !c.b.take(node, nil) || !c.b.take(other, nil) {
				failed = fmt.Sprint("no free turn at call ", i)
			}
			c.b.release(node)
			c.b.release(other)
		})
		if failed != "" {
			t.Fatalf("servers=%s: %s", c.name, failed)
		}
		if n != 0 {
			t.Errorf("servers=%s: a call taking and ending a turn allocates %v times; want none", c.name, n)
		}
		checkCounts(t, c.b, "servers="+c.name+": after the calls", 0, 0, 0)
	}
}
