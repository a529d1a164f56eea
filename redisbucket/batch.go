package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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
// A call takes one of slots turns if one is free and goes straight out
// with its own context, as without a batcher; so a lone call pays a
// mutex and nothing more. Otherwise it joins the queue and waits, on its
// own context too, for one of two things: its reply, sent in another
// call's pipeline; or a turn, which a call that ends hands to the oldest
// in the queue. The call given a turn leads: it takes the queue (up to
// max calls of its server, itself first), sends it as one pipeline, hands
// the turn on, and wakes each call with its reply. Every call in a pipeline is bounded
// by the leader's deadline, which, the leader being the oldest, comes
// first; a leader whose caller's own deadline is shorter than the store's
// timeout sends itself alone, so that no caller's haste fails the calls
// of others.
//
// A waiting call whose context ends returns at once. If it was still
// queued it leaves the queue; if it was taken into a pipeline, the
// pipeline goes on and its reply is dropped (the tokens are spent in
// Redis and not used: under-admission only); if it was handed a turn, it
// hands the turn on.
type batcher struct {
	slots, max int
	ds         *deadlines // the store's: bounds a pipeline
	// node returns the server a Redis key is on, for a client of several
	// (nil: one server), or an error: a pipeline holds the calls of one
	// server only, so that a server that fails or hangs delays no call
	// to another.
	node     func(ctx context.Context, key string) (*redis.Client, error)
	mu       sync.Mutex
	inflight int       // turns taken: straight calls and pipelines in flight
	queue    []*waiter // calls waiting for a turn, oldest first; empty unless inflight == slots
}

// waiter is one queued call.
type waiter struct {
	ctx   context.Context // the call's, bounded by the store's timeout
	alone bool            // the caller's deadline is shorter than the timeout (or its server unknown): never with others
	node  *redis.Client   // the server the call's key is on (batcher.node), or nil
	cmd   *redis.IntSliceCmd
	state wstate        // guarded by batcher.mu
	wake  chan struct{} // capacity 1: the call's reply is in cmd, or it was handed a turn
}

type wstate uint8

const (
	queued  wstate = iota // in batcher.queue
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
	return b
}

// process sends cmd through c, bounded by ctx, straight out or in a
// pipeline. alone says the caller's own deadline is shorter than the
// store's timeout. It returns cmd's error, or ctx's if ctx ended first;
// and whether cmd's arguments may be reused (not if a pipeline that may
// still be writing them holds cmd).
func (b *batcher) process(ctx context.Context, c redis.UniversalClient, cmd *redis.IntSliceCmd, alone bool) (err error, reuse bool) {
	if b.take(nil) {
		return b.straight(ctx, c, cmd), true
	}
	w := waiterPool.Get().(*waiter)
	w.ctx, w.alone, w.cmd, w.state = ctx, alone, cmd, queued
	if b.node != nil && !alone { // outside the mutex: it may wait for the cluster's slot map
		key, _ := cmd.Args()[3].(string)
		var err error
		if w.node, err = b.node(ctx, key); err != nil {
			w.alone = true
		}
	}
	if b.take(w) { // a turn came free meanwhile
		*w = waiter{wake: w.wake}
		waiterPool.Put(w)
		return b.straight(ctx, c, cmd), true
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

// take takes a free turn, if there is one; if not, it queues w, if any.
func (b *batcher) take(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight < b.slots {
		b.inflight++
		return true
	}
	if w != nil {
		b.queue = append(b.queue, w)
	}
	return false
}

// straight sends cmd alone, on a turn it took, and ends the turn (even
// if the client panics).
func (b *batcher) straight(ctx context.Context, c redis.UniversalClient, cmd *redis.IntSliceCmd) error {
	defer b.release()
	return c.Process(ctx, cmd)
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
		i := slices.Index(b.queue, w)
		b.queue = slices.Delete(b.queue, i, i+1)
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
	<-w.wake    // handed a turn (signalled just after the state was set)
	b.release() // that it will not use: it hands it on
	*w = waiter{wake: w.wake}
	waiterPool.Put(w)
	return false, true
}

// release ends a turn: it hands it to the oldest queued call, or frees it.
func (b *batcher) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inflight--
		b.mu.Unlock()
		return
	}
	w := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	if len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let the backing array be reused from its start
	}
	w.state = leading
	b.mu.Unlock()
	w.wake <- struct{}{}
}

// lead sends w, which was handed a turn, with the queued calls after it
// on its server (up to b.max in all) as one pipeline, bounded by w's
// deadline, then
// hands the turn on and wakes them with their replies.
func (b *batcher) lead(c redis.UniversalClient, w *waiter) {
	bt := batchPool.Get().(*batch)
	bt.ws = append(bt.ws[:0], w)
	b.mu.Lock()
	if !w.alone && w.ctx.Err() == nil { // an ended leader sends itself, to fail at once
		n := 0
		for _, o := range b.queue {
			if len(bt.ws) == b.max {
				break
			}
			if !o.alone && o.node == w.node {
				o.state = taken
				bt.ws = append(bt.ws, o)
				n++
			}
		}
		if n > 0 {
			b.queue = slices.DeleteFunc(b.queue, func(o *waiter) bool { return o.state == taken })
		}
	}
	b.mu.Unlock()
	sent := false
	defer func() { // even if the client panics (a hook's panic), the others are answered and the turn goes on
		b.release()
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
		_ = c.Process(w.ctx, w.cmd)
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
	}
	sent = true
}

// errLeaderPanicked is the error of the calls of a pipeline whose client
// panicked while sending it, in the goroutine of another call.
var errLeaderPanicked = errors.New("redisbucket: the client panicked sending the pipeline")

// Pipelining configures WithPipelining. Its zero value is the defaults.
type Pipelining struct {
	// InFlight is how many calls (alone, or pipelines of several) may be
	// in flight at once before further calls wait to go in a pipeline.
	// The default is DefaultPipelineInFlight.
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
// p.InFlight others are in flight together, as pipelines of up to
// p.MaxBatch calls: one write and one read, on the client and on the
// server, for many calls, which share the round trip and the system
// calls. A call sent while fewer are in flight goes straight out, as
// without the option, so a lone caller pays nothing more than an
// uncontended mutex; no goroutine is started.
//
// Each waiting call still honours its own context and the store's
// timeout: it returns at once when either ends. A call whose context
// ends after its command went out in a pipeline returns without its
// reply, which is dropped: the tokens it spent in Redis are not used
// (under-admission only, never over). A pipeline is bounded by the
// deadline of its oldest call, which is the earliest; so a call in a
// pipeline can fail up to the time it waited in the queue before its own
// timeout. A caller whose context's deadline is shorter than the
// store's timeout never sends others' calls, so no caller's deadline
// fails another's call.
//
// Decisions, the deny cache, the breaker, leases, the failure policies,
// the observer and Stats work as without the option: each call in a
// pipeline is still one call, answered and counted on its own. On a
// redis.ClusterClient a pipeline holds the calls of one master only, by
// the client's slot map (on a redis.Ring, of one shard), so that a master
// that fails or hangs delays no call to another; the pipelines of another
// kind of client may span its servers. The client's hooks see pipelines
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
