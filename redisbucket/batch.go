package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
)

// A batcher sends the script calls that arrive while others are in flight
// together, as one pipeline: one write and one read for many EVALSHAs, on
// the client and on the server, instead of one each (a group commit; see
// WithPipelining). It holds no goroutine of its own: the calls themselves
// do the work.
//
// Each server has its own turns and queue (turns): on a client of several
// servers (a Cluster's masters, a Ring's shards), a call takes the turns
// of the server its key is on, so that calls to a server that hangs,
// taking all of its turns and queueing behind them, delay no call to
// another. A call takes one of slots turns of its server if one is free
// and goes straight out with its own context, as without a batcher; so a
// lone call pays a mutex (and, on a client of several servers, a look-up
// of its key's server) and nothing more. Otherwise it joins its server's
// queue and waits, on its own context too, for one of two things: its
// reply, sent in another call's pipeline; or a turn, which a call that
// ends hands to the oldest in its server's queue. The call given a turn
// leads: it takes the queue (up to max calls, itself first), sends it as
// one pipeline, hands the turn on, and wakes each call with its reply.
// Every call in a pipeline is bounded by the leader's deadline. A queued
// call goes in a pipeline only if that deadline is at or past the middle
// of its own wait (from joining the queue to its own deadline): so a
// caller's haste (a deadline far shorter than others') fails no call
// before it has had half its time, and callers whose deadlines are alike
// (a proxy's timeout on every request, or the store's) share pipelines
// as freely as the oldest-first order allows. A call that joined the
// queue with no deadline, which the store never makes, joins any
// pipeline.
//
// A waiting call whose context ends returns at once. If it was still
// queued it leaves the queue; if it was taken into a pipeline, the
// pipeline goes on and its reply is dropped (the tokens are spent in
// Redis and not used: under-admission only); if it was handed a turn, it
// hands the turn on.
//
// A server's turns are kept while any of its calls is in flight or
// queued, and dropped when its last call ends, so that the servers a
// reshard or a failover takes away leave nothing behind. They are a
// map's values, not pointers: adding and dropping them allocates nothing
// once the map has grown to the servers in use at once.
type batcher struct {
	slots, max int
	ds         *deadlines // the store's: bounds a pipeline
	// node returns the server a Redis key is on, for a client of several
	// (nil: one server), or an error: a call takes that server's turns,
	// and a pipeline holds the calls of one server only, so that a server
	// that fails or hangs delays no call to another.
	node  func(ctx context.Context, key string) (*redis.Client, error)
	mu    sync.Mutex
	one   turns                   // the one server's, without node; with it, those of the calls whose server is unknown
	nodes map[*redis.Client]turns // with node: each server's with a call in flight or queued
}

// turns is one server's turns and queue, guarded by batcher.mu.
type turns struct {
	inflight int       // turns taken: straight calls and pipelines in flight
	queue    []*waiter // calls waiting for a turn, oldest first; empty unless inflight == slots
}

// waiter is one queued call.
type waiter struct {
	ctx   context.Context // the call's, bounded by the store's timeout
	mid   time.Time       // the middle of its wait, from joining the queue to its deadline: the earliest pipeline deadline it accepts
	solo  bool            // its server is unknown: never with others
	node  *redis.Client   // the server the call's key is on (batcher.node), whose turns it takes; nil: the one server, or unknown
	cmd   *redis.IntSliceCmd
	src   string        // the source of cmd's script, for an EVAL after NOSCRIPT
	state wstate        // guarded by batcher.mu
	wake  chan struct{} // capacity 1: the call's reply is in cmd, or it was handed a turn
}

type wstate uint8

const (
	queued  wstate = iota // in its server's queue
	leading               // handed a turn
	taken                 // in a leader's pipeline
)

var waiterPool = sync.Pool{New: func() any { return &waiter{wake: make(chan struct{}, 1)} }}

// batch is the calls a leader sends, and their commands.
type batch struct {
	ws   []*waiter
	cmds []redis.Cmder
}

// batchPool holds the batches leaders build their pipelines in.
var batchPool = sync.Pool{New: func() any { return new(batch) }}

func newBatcher(slots, max int, ds *deadlines, c redis.UniversalClient) *batcher {
	b := &batcher{slots: slots, max: max, ds: ds}
	switch c := c.(type) {
	case *redis.ClusterClient:
		b.node = c.MasterForKey
	case *redis.Ring:
		b.node = func(_ context.Context, key string) (*redis.Client, error) { return c.GetShardClientForKey(key) }
	}
	if b.node != nil {
		b.nodes = make(map[*redis.Client]turns)
	}
	return b
}

// process sends cmd, an EVALSHA of the script whose source is src,
// through c, bounded by ctx, straight out or in a pipeline; and, on the
// same turn, as EVAL of src if the server answers NOSCRIPT (see
// evalsha). It returns cmd's error, or ctx's if ctx ended first; and
// whether cmd's arguments may be reused (not if a pipeline that may
// still be writing them holds cmd).
func (b *batcher) process(ctx context.Context, c redis.UniversalClient, cmd *redis.IntSliceCmd, src string) (err error, reuse bool) {
	var node *redis.Client
	solo := false
	if b.node != nil { // outside the mutex: it may wait for the cluster's slot map
		key, _ := cmd.Args()[3].(string)
		var err error
		if node, err = b.node(ctx, key); err != nil || node == nil {
			node, solo = nil, true // the unknown servers' turns, and never with others
		}
	}
	if b.take(node, nil) {
		return b.straight(ctx, c, node, cmd, src), true
	}
	w := waiterPool.Get().(*waiter)
	w.ctx, w.solo, w.node, w.cmd, w.src, w.state = ctx, solo, node, cmd, src, queued
	if d, ok := ctx.Deadline(); ok {
		now := time.Now()
		w.mid = now.Add(d.Sub(now) / 2)
	}
	if b.take(node, w) { // a turn came free meanwhile
		*w = waiter{wake: w.wake}
		waiterPool.Put(w)
		return b.straight(ctx, c, node, cmd, src), true
	}
	select {
	case <-w.wake:
	case <-ctx.Done():
		if woken, reuse := b.leave(w); !woken {
			return ctx.Err(), reuse
		}
	}
	if w.state == leading {
		b.lead(c, w)
	}
	err = cmd.Err()
	*w = waiter{wake: w.wake}
	waiterPool.Put(w)
	return err, true
}

// turnsOf returns node's turns (b.one for nil; none taken if it has
// none); b.mu held.
func (b *batcher) turnsOf(node *redis.Client) turns {
	if node == nil {
		return b.one
	}
	return b.nodes[node]
}

// setTurns sets node's turns to t, dropping them if none is taken (and
// so none queued); b.mu held.
func (b *batcher) setTurns(node *redis.Client, t turns) {
	switch {
	case node == nil:
		b.one = t
	case t.inflight == 0:
		delete(b.nodes, node)
	default:
		b.nodes[node] = t
	}
}

// take takes a free turn of node, if there is one; if not, it queues w,
// if any, in node's queue.
func (b *batcher) take(node *redis.Client, w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.turnsOf(node)
	if t.inflight < b.slots {
		t.inflight++
		b.setTurns(node, t)
		return true
	}
	if w != nil {
		t.queue = append(t.queue, w)
		b.setTurns(node, t)
	}
	return false
}

// straight sends cmd alone (as evalsha does), on a turn of node it
// took, and ends the turn (even if the client panics).
func (b *batcher) straight(ctx context.Context, c redis.UniversalClient, node *redis.Client, cmd *redis.IntSliceCmd, src string) error {
	defer b.release(node)
	return evalsha(ctx, c, cmd, src)
}

// leave takes w, whose context ended, out of the batcher, unless its
// reply is already in: it reports whether it is (woken: w is then read
// as if the context had not ended), and, if not, whether w's command
// was never sent (reuse: its arguments may be reused). Unless woken, w
// is no longer the caller's to touch.
func (b *batcher) leave(w *waiter) (woken, reuse bool) {
	b.mu.Lock()
	switch w.state {
	case queued:
		t := b.turnsOf(w.node) // its turns all taken: they stay
		i := slices.Index(t.queue, w)
		t.queue = slices.Delete(t.queue, i, i+1)
		b.setTurns(w.node, t)
		b.mu.Unlock()
		*w = waiter{wake: w.wake} // nothing refers to it, and no signal is due
		waiterPool.Put(w)
		return false, true
	case taken:
		b.mu.Unlock()
		select {
		case <-w.wake: // the reply came with the context's end
			return true, true
		default:
			// The leader may still be writing the command, and will
			// signal into the buffer, to no one.
			return false, false
		}
	}
	b.mu.Unlock()
	<-w.wake          // handed a turn (signalled just after the state was set)
	b.release(w.node) // that it will not use: it hands it on
	*w = waiter{wake: w.wake}
	waiterPool.Put(w)
	return false, true
}

// release ends a turn of node: it hands it to the oldest call queued for
// node, or frees it, dropping node's turns if that was the last.
func (b *batcher) release(node *redis.Client) {
	b.mu.Lock()
	t := b.turnsOf(node)
	if len(t.queue) == 0 {
		t.inflight--
		b.setTurns(node, t)
		b.mu.Unlock()
		return
	}
	w := t.queue[0]
	t.queue[0] = nil
	t.queue = t.queue[1:]
	if len(t.queue) == 0 {
		t.queue = nil // the array's front is spent by the [1:] above: the next queued call starts a new one
	}
	b.setTurns(node, t)
	w.state = leading
	b.mu.Unlock()
	w.wake <- struct{}{}
}

// lead sends w, which was handed a turn of its server, with the calls
// queued after it for that server (up to b.max in all) as one pipeline,
// bounded by w's deadline, then hands the turn on and wakes them with
// their replies.
func (b *batcher) lead(c redis.UniversalClient, w *waiter) {
	bt := batchPool.Get().(*batch)
	bt.ws = append(bt.ws[:0], w)
	b.mu.Lock()
	if !w.solo && w.ctx.Err() == nil { // an ended leader sends itself, to fail at once
		t := b.turnsOf(w.node)
		d := deadlineOf(w.ctx)
		n := 0
		for _, o := range t.queue { // each of w's server (or, unknown, alone)
			if len(bt.ws) == b.max {
				break
			}
			if !o.solo && !o.mid.After(d) { // w's deadline leaves o at least half its wait
				o.state = taken
				bt.ws = append(bt.ws, o)
				n++
			}
		}
		if n > 0 {
			t.queue = slices.DeleteFunc(t.queue, func(o *waiter) bool { return o.state == taken })
			b.setTurns(w.node, t)
		}
	}
	b.mu.Unlock()
	sent := false
	defer func() { // even if the client panics (a hook's panic), the others are answered and the turn goes on
		b.release(w.node)
		for _, o := range bt.ws[1:] {
			if !sent {
				o.cmd.SetErr(errLeaderPanicked)
			}
			o.wake <- struct{}{}
		}
		clear(bt.ws)
		clear(bt.cmds)
		bt.ws, bt.cmds = bt.ws[:0], bt.cmds[:0]
		batchPool.Put(bt)
	}()
	if len(bt.ws) == 1 {
		_ = evalsha(w.ctx, c, w.cmd, w.src)
	} else {
		for _, o := range bt.ws {
			bt.cmds = append(bt.cmds, o.cmd)
		}
		ctx := w.ctx
		if _, ok := ctx.(*timeoutCtx); !ok { // not cancelled but at its deadline already
			d := deadlineOf(ctx)
			ctx = &timeoutCtx{Context: context.WithoutCancel(ctx), deadline: d, slot: b.ds.slotFor(d)}
		}
		pipe := c.Pipeline()
		_ = pipe.BatchProcess(ctx, bt.cmds...)
		_, _ = pipe.Exec(ctx) // each command holds its own reply or error
		b.evalAgain(ctx, c, bt)
	}
	sent = true
}

// evalAgain sends, on the turn of the pipeline bt that was just sent, the
// commands the server answered NOSCRIPT (a flushed script cache, a
// restarted server) as EVALs of their scripts' sources, in one pipeline,
// and puts their replies in them: within the turn, so that a pipeline's
// calls do not all send the script's source at once past InFlight.
func (b *batcher) evalAgain(ctx context.Context, c redis.UniversalClient, bt *batch) {
	var again []redis.Cmder
	for _, o := range bt.ws {
		if noScript(o.cmd.Err()) {
			again = append(again, asEval(ctx, o.cmd, o.src))
		}
	}
	if len(again) == 0 {
		return
	}
	pipe := c.Pipeline()
	_ = pipe.BatchProcess(ctx, again...)
	_, _ = pipe.Exec(ctx)
	i := 0
	for _, o := range bt.ws {
		if noScript(o.cmd.Err()) {
			e := again[i].(*redis.IntSliceCmd)
			o.cmd.SetVal(e.Val())
			o.cmd.SetErr(e.Err())
			i++
		}
	}
}

// errLeaderPanicked is the error of the calls of a pipeline whose client
// panicked while sending it, in the goroutine of another call.
var errLeaderPanicked = errors.New("redisbucket: the client panicked sending the pipeline")

// Pipelining configures WithPipelining. Its zero value is the defaults.
type Pipelining struct {
	// InFlight is how many calls (alone, or pipelines of several) may be
	// in flight at once to one server before further calls to it wait to
	// go in a pipeline: to each master of a redis.ClusterClient, each
	// shard of a redis.Ring, and to all the servers of another kind of
	// client together. The default is DefaultPipelineInFlight.
	InFlight int
	// MaxBatch is the most calls one pipeline sends. The default is
	// DefaultPipelineMaxBatch.
	MaxBatch int
}

// Defaults and bounds of Pipelining.
const (
	// DefaultPipelineInFlight is Pipelining.InFlight's default.
	DefaultPipelineInFlight = 2
	// DefaultPipelineMaxBatch is Pipelining.MaxBatch's default.
	DefaultPipelineMaxBatch = 16
	// MaxPipelineInFlight is the largest InFlight accepted.
	MaxPipelineInFlight = 1024
	// MaxPipelineBatch is the largest MaxBatch accepted.
	MaxPipelineBatch = 4096
)

// WithPipelining makes the store send the script calls that arrive while
// p.InFlight others are in flight to the same server together, as
// pipelines of up to p.MaxBatch calls: one write and one read, on the
// client and on the server, for many calls, which share the round trip
// and the system calls. A call sent while fewer are in flight goes
// straight out, as without the option, so a lone caller pays nothing
// more than an uncontended mutex (and, on a Cluster or a Ring, a look-up
// of its key's server in the client's map); no goroutine is started.
//
// Each waiting call still honours its own context and the store's
// timeout: it returns at once when either ends. A call whose context
// ends after its command went out in a pipeline returns without its
// reply, which is dropped: the tokens it spent in Redis are not used
// (under-admission only, never over). A pipeline is bounded by the
// deadline of its leader, the oldest queued call, and a queued call goes
// in it only if that deadline is at or past the middle of the call's own
// wait, from joining the queue to its deadline (the caller's, or the
// store's timeout, whichever is sooner). So a call in a pipeline fails
// on a slow server at most half its wait before its own deadline would
// have, and a caller in haste (a deadline far shorter than the others')
// fails no one's call sooner than that; callers with like deadlines (a
// proxy's timeout on every request, as Envoy sets) share pipelines.
//
// Decisions, the deny cache, the breaker, leases, the failure policies,
// the observer and Stats work as without the option: each call in a
// pipeline is still one call, answered and counted on its own.
// Store.AllowAll's one call takes turns as any other; and the calls a
// server answers NOSCRIPT (its script cache flushed, or a restarted
// server) send the script's source on the turn they held, as one
// pipeline, not each on its own past InFlight. The calls of an
// InflightStore (Store.Inflight) take no turns: each goes straight out,
// on a connection of the client's pool. On a
// redis.ClusterClient each master has its own p.InFlight turns and queue,
// by the client's slot map (on a redis.Ring, each shard), and a pipeline
// holds the calls of one master only, so that a master that fails or
// hangs delays no call to another; the turns and pipelines of another
// kind of client span its servers. The client's hooks see pipelines
// (ProcessPipelineHook) for the calls that went in one.
//
// Pipelining pays when the server or the client is busy with many
// callers at once (the single-threaded server spends less per call); on
// a slow network with an idle server, a call that waits for a turn
// waits up to one round trip more. See BenchmarkRedis (op=allow-pipelined).
//
// New returns an error wrapping keyrate.ErrInvalidOption if p.InFlight
// is negative or above MaxPipelineInFlight, or p.MaxBatch negative or
// above MaxPipelineBatch. Zero fields take their defaults. The default is
// no pipelining: every call goes straight out, each on a connection of
// the client's pool.
func WithPipelining(p Pipelining) keyrate.Option {
	return config.StoreOption("redisbucket.WithPipelining", func(s *settings) error {
		switch {
		case p.InFlight < 0 || p.InFlight > MaxPipelineInFlight:
			return fmt.Errorf("pipelining InFlight %d is not from 0 (the default) to %d", p.InFlight, MaxPipelineInFlight)
		case p.MaxBatch < 0 || p.MaxBatch > MaxPipelineBatch:
			return fmt.Errorf("pipelining MaxBatch %d is not from 0 (the default) to %d", p.MaxBatch, MaxPipelineBatch)
		}
		if p.InFlight == 0 {
			p.InFlight = DefaultPipelineInFlight
		}
		if p.MaxBatch == 0 {
			p.MaxBatch = DefaultPipelineMaxBatch
		}
		s.pipelining = &p
		return nil
	})
}
