package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/redisbucket"
)

// evalHold, once armed, holds the first EVAL that reaches it (alone or
// in a pipeline) until its gate closes, and counts the EVALs and the
// round trips (a pipeline is one) that carry them.
type evalHold struct {
	gate         chan struct{}
	armed, first atomic.Bool
	evals, trips atomic.Int32
}

func (h *evalHold) carry(n int32) {
	if n == 0 || !h.armed.Load() {
		return
	}
	h.trips.Add(1) // before evals: a count of evals read includes their trips
	h.evals.Add(n)
	if h.first.CompareAndSwap(false, true) {
		<-h.gate
	}
}

func (h *evalHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *evalHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			h.carry(1)
		}
		return next(ctx, cmd)
	}
}

func (h *evalHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int32
		for _, c := range cmds {
			if c.Name() == "eval" {
				n++
			}
		}
		h.carry(n)
		return next(ctx, cmds)
	}
}

// TestPipelineNoScriptInFlight: the calls of a pipeline that the server
// answers NOSCRIPT (its script cache flushed, or a restarted server)
// send EVAL again within WithPipelining's InFlight, as every other call:
// with InFlight 1, the four EVALs go as one pipeline on the turn the
// EVALSHAs' pipeline held, not as four EVALs (each the script's whole
// source) at once on a server that has just come back.
func TestPipelineNoScriptInFlight(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	gate := newGateHook()
	client.AddHook(gate)
	hold := &evalHold{gate: make(chan struct{})}
	client.AddHook(hold)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	if d, err := s.AllowN("load", 1); err != nil || !d.Allowed { // loads the script
		t.Fatalf("AllowN = %+v, %v", d, err)
	}
	hold.armed.Store(true)
	answers, openPipe := flushedPipeline(t, srv, s, gate, func(i int) (keyrate.Decision, error) {
		return s.AllowNContext(t.Context(), fmt.Sprint("k", i), 1)
	})
	openPipe()
	// The first round trip with an EVAL is held: the pipeline's four
	// EVALs must all be in it, not each in one of its own beside it.
	deadline := time.Now().Add(answerWithin)
	for hold.evals.Load() < 4 {
		if time.Now().After(deadline) {
			close(hold.gate)
			t.Fatalf("%d EVALs sent after %v; want 4", hold.evals.Load(), answerWithin)
		}
		runtime.Gosched()
	}
	if n := hold.trips.Load(); n != 1 {
		t.Errorf("the 4 EVALs after NOSCRIPT went in %d round trips at once with InFlight 1; want one pipeline on the turn", n)
	}
	close(hold.gate)
	for i, ch := range answers {
		if o := within(t, "a call of the pipeline", ch); o.err != nil || !o.d.Allowed || o.d.Remaining != 4 {
			t.Errorf("key k%d: %+v, %v; want allowed with 4 left", i, o.d, o.err)
		}
	}
}

// TestPipelineAllowAllInFlight: Store.AllowAll's one script call is a
// call as AllowN's is (Stats.Calls counts it), so WithPipelining's
// InFlight bounds it too: with InFlight 1 and one call in flight, an
// AllowAll on one server waits for the turn (here, in the queue) instead
// of going out beside it, and is answered once the turn comes.
func TestPipelineAllowAllInFlight(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	gate := newGateHook()
	client.AddHook(gate)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	keys := []keyrate.KeyCost{{Key: "a", Cost: 1}, {Key: "b", Cost: 2}}
	if m, err := s.AllowAll(keys); err != nil || !m.Allowed { // loads the script
		t.Fatalf("AllowAll = %+v, %v", m, err)
	}
	open := gate.armCall()
	first := goAllow(t.Context(), s, "first")
	<-gate.entered
	all := make(chan outcome, 1)
	go func() {
		m, err := s.AllowAll(keys)
		all <- outcome{m.Decision, err}
	}()
	deadline := time.Now().Add(answerWithin)
	for queued := false; !queued; {
		select {
		case o := <-all:
			open()
			t.Fatalf("AllowAll answered (%+v, %v) while a call held the one turn: it went past InFlight", o.d, o.err)
		default:
		}
		if q, _ := redisbucket.Pipelined(s); q == 1 {
			queued = true
		} else if time.Now().After(deadline) {
			open()
			t.Fatalf("AllowAll neither queued nor answered after %v", answerWithin)
		}
		runtime.Gosched()
	}
	open()
	if o := within(t, "the first call", first); o.err != nil || !o.d.Allowed {
		t.Errorf("the first call: %+v, %v", o.d, o.err)
	}
	if o := within(t, "AllowAll", all); o.err != nil || !o.d.Allowed || o.d.Remaining != 1 {
		t.Errorf("AllowAll: %+v, %v; want allowed with 1 left (b, 4 of 5 spent)", o.d, o.err)
	}
}

// TestPipelineAllowAllBackends: AllowAll calls of one hash tag, mixed
// with AllowN calls, from goroutines through one turn per server and
// pipelines of up to 4, on one server, a Cluster and a Ring: each is
// answered, all or nothing, and no key admits past its Burst (the tag's
// two keys, each spent by every allowed AllowAll, admit the same), and
// no turn stays taken.
func TestPipelineAllowAllBackends(t *testing.T) {
	const goroutines, calls, burst = 8, 10, 30
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			c := b.client(t)
			s := mustNew(t, c, keyrate.PerHour(1).WithBurst(burst), redisbucket.WithPrefix("{"+uniquePrefix(t)+"}"),
				redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
				redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4}))
			keys := []keyrate.KeyCost{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}
			var admitted, single atomic.Int32
			conformance.Together(goroutines, func(g int) {
				for i := range calls {
					if (g+i)%2 == 0 {
						m, err := s.AllowAll(keys)
						if err != nil {
							t.Errorf("AllowAll: %+v, %v", m, err)
							return
						}
						if m.Allowed {
							admitted.Add(1)
						}
						continue
					}
					d, err := s.AllowN("c", 1)
					if err != nil {
						t.Errorf("AllowN: %+v, %v", d, err)
						return
					}
					if d.Allowed {
						single.Add(1)
					}
				}
			})
			if n := admitted.Load(); n != burst { // goroutines*calls/2 AllowAlls: more than the burst
				t.Errorf("AllowAll admitted %d; want the burst %d", n, burst)
			}
			for _, k := range []string{"a", "b"} {
				if d := s.Peek(k); d.Remaining != burst-int(admitted.Load()) {
					t.Errorf("Peek(%s) = %+v after %d admitted; want %d left", k, d, admitted.Load(), burst-int(admitted.Load()))
				}
			}
			if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
				t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
			}
		})
	}
}

// TestPipelineClientClosed: the client closed while a call holds the one
// turn and three more are queued for it: once the held call goes on,
// every call returns at once with an error wrapping ErrUnavailable
// (FailClosed: denied, never a silent deny), no turn stays taken, and no
// goroutine is left running.
func TestPipelineClientClosed(t *testing.T) {
	srv := server(t)
	ignore := goleak.IgnoreCurrent() // the server's own
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	gate := newGateHook()
	client.AddHook(gate)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	if d, err := s.AllowN("load", 1); err != nil || !d.Allowed { // loads the script
		t.Fatalf("AllowN = %+v, %v", d, err)
	}
	open := gate.armCall()
	answers := []<-chan outcome{goAllow(t.Context(), s, "first")}
	<-gate.entered
	for i := range 3 {
		answers = append(answers, goAllow(t.Context(), s, fmt.Sprint("k", i)))
		waitQueued(t, s, i+1)
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	open()
	for i, ch := range answers {
		if o := within(t, "a call on a closed client", ch); !errors.Is(o.err, redisbucket.ErrUnavailable) || o.d.Allowed {
			t.Errorf("call %d on a closed client: %+v, %v; want denied with an error wrapping ErrUnavailable", i, o.d, o.err)
		}
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
	}
	if err := leaktest.Find(ignore); err != nil {
		t.Error(err)
	}
}

// TestPipelineNoScriptMixed: a pipeline of calls of both scripts (token
// buckets, and a sliding log's tier) that the server answers NOSCRIPT
// sends each call's own script again: every call gets its own policy's
// answer.
func TestPipelineNoScriptMixed(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	gate := newGateHook()
	client.AddHook(gate)
	logPolicy := keyrate.Policy{Name: "log", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: time.Hour}.Using(keyrate.SlidingLog)}}
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}), keyrate.WithPolicies(logPolicy))
	tier, err := s.Tier("log")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() (keyrate.Decision, error){ // loads both scripts
		func() (keyrate.Decision, error) { return s.AllowN("load", 1) },
		func() (keyrate.Decision, error) { return s.AllowTier("load", tier, 1) },
	} {
		if d, err := f(); err != nil || !d.Allowed {
			t.Fatalf("loading: %+v, %v", d, err)
		}
	}
	answers, openPipe := flushedPipeline(t, srv, s, gate, func(i int) (keyrate.Decision, error) {
		if i%2 == 0 {
			return s.AllowNContext(t.Context(), fmt.Sprint("k", i), 1)
		}
		return s.AllowTierContext(t.Context(), fmt.Sprint("k", i), tier, 1)
	})
	openPipe()
	for i, ch := range answers {
		policy, left := keyrate.DefaultPolicy, 4
		if i%2 == 1 {
			policy, left = "log", 2
		}
		if o := within(t, "a call of the pipeline", ch); o.err != nil || !o.d.Allowed || o.d.Policy != policy || o.d.Remaining != left {
			t.Errorf("key k%d: %+v, %v; want allowed under %q with %d left", i, o.d, o.err, policy, left)
		}
	}
	if got := gate.pipelines(); !slices.Equal(got, []int{4}) {
		t.Errorf("pipelines of %v calls; want one of 4", got)
	}
}
