package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// gateHook holds up the client's commands where a test says: the next
// EVALSHA sent alone once armCall is called, the next pipeline once
// armPipe is; each waits, having said so on entered, until the test
// closes the gate it was armed with. It records how many EVALSHAs each
// pipeline holds.
type gateHook struct {
	call, pipe atomic.Pointer[chan struct{}] // the gate of the next one, if armed
	panics     atomic.Bool                   // the next pipeline panics
	entered    chan string
	mu         sync.Mutex
	sent       [][]string // the Redis keys of each pipeline's EVALSHAs
}

func newGateHook() *gateHook { return &gateHook{entered: make(chan string, 16)} }

// armCall makes the next EVALSHA sent alone wait until the returned
// function is called.
func (h *gateHook) armCall() (open func()) {
	g := make(chan struct{})
	h.call.Store(&g)
	return func() { close(g) }
}

// armPipe makes the next pipeline wait until the returned function is
// called.
func (h *gateHook) armPipe() (open func()) {
	g := make(chan struct{})
	h.pipe.Store(&g)
	return func() { close(g) }
}

// pipelines returns how many EVALSHAs each pipeline held.
func (h *gateHook) pipelines() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n []int
	for _, keys := range h.sent {
		n = append(n, len(keys))
	}
	return n
}

// pipelineKeys returns the Redis keys of each pipeline's EVALSHAs.
func (h *gateHook) pipelineKeys() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			if g := h.call.Swap(nil); g != nil {
				h.entered <- "call"
				<-*g
			}
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var keys []string
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				keys = append(keys, c.Args()[3].(string))
			}
		}
		if len(keys) == 0 {
			return next(ctx, cmds) // a new connection's handshake
		}
		h.mu.Lock()
		h.sent = append(h.sent, keys)
		h.mu.Unlock()
		if h.panics.Swap(false) {
			panic("a hook's panic")
		}
		if g := h.pipe.Swap(nil); g != nil {
			h.entered <- "pipeline"
			<-*g
		}
		return next(ctx, cmds)
	}
}

// hookable is a client a gateHook can be added to.
type hookable interface {
	redis.UniversalClient
	AddHook(redis.Hook)
}

// addHook adds h to c, so that it sees every command and pipeline the
// store sends through c: on a redis.Ring, to each of its shards (the
// store sends a pipeline straight to a shard, past the Ring's own hooks,
// and the Ring sends every command through a shard's).
func addHook(t testing.TB, c redis.UniversalClient, h redis.Hook) {
	t.Helper()
	r, ok := c.(*redis.Ring)
	if !ok {
		c.(hookable).AddHook(h)
		return
	}
	err := r.ForEachShard(t.Context(), func(_ context.Context, shard *redis.Client) error {
		shard.AddHook(h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// serverOf returns the address of the server c sends key to: its master
// on a Cluster, its shard on a Ring, and "" for one server.
func serverOf(t testing.TB, c redis.UniversalClient, key string) string {
	t.Helper()
	var (
		node *redis.Client
		err  error
	)
	switch c := c.(type) {
	case *redis.ClusterClient:
		node, err = c.MasterForKey(t.Context(), key)
	case *redis.Ring:
		node, err = c.GetShardClientForKey(key)
	default:
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return node.Options().Addr
}

// waitQueued waits, polling, until s's pipelining queue holds n calls.
func waitQueued(t *testing.T, s *redisbucket.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(answerWithin)
	for {
		if q, _ := redisbucket.Pipelined(s); q == n {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after %v; want %d", q, answerWithin, n)
		}
		runtime.Gosched()
	}
}

// outcome is one call's answer.
type outcome struct {
	d   keyrate.Decision
	err error
}

// goAllow calls s.AllowNContext(ctx, key, 1) on a goroutine and returns
// the channel its answer comes on.
func goAllow(ctx context.Context, s *redisbucket.Store, key string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		d, err := s.AllowNContext(ctx, key, 1)
		ch <- outcome{d, err}
	}()
	return ch
}

// TestPipelineBatches: with one turn, the calls that arrive while a call
// is in flight (held there by a hook, until all have queued) go out as
// pipelines of at most MaxBatch calls of one server, each led by the
// oldest call queued, in the order they came: on one server, 12 calls
// behind one in flight, batches of 5, are pipelines of 5, 5 and 2; on a
// Redis Cluster of 3 masters, where each master has turns of its own,
// the same calls behind one held call on each of their masters are
// split by master, as the client's slot map says, each master's in the
// order they came. Each call gets its own key's decision: key i had
// i mod 7 of its 5 tokens spent before, so it is allowed with 4 − i mod 7
// left, or denied.
func TestPipelineBatches(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			const n, burst = 12, 5
			client := b.client(t)
			hook := newGateHook()
			addHook(t, client, hook)
			limit := keyrate.PerHour(1).WithBurst(burst)
			prefix := uniquePrefix(t)
			s := mustNew(t, client, limit, redisbucket.WithPrefix(prefix),
				redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
				redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 5}))
			key := func(i int) string { return fmt.Sprint("k", i) }
			spent := func(i int) int { return i % 7 }
			for i := range n {
				if c := min(spent(i), burst); c > 0 { // each goes straight out: nothing else is in flight
					if d, err := s.AllowN(key(i), c); err != nil || !d.Allowed {
						t.Fatalf("AllowN(%q, %d) = %+v, %v; want allowed", key(i), c, d, err)
					}
				}
			}
			if got := hook.pipelines(); len(got) != 0 {
				t.Fatalf("calls made one at a time went in pipelines %v", got)
			}
			before := s.Stats().Calls

			// The server (master, shard) of a key: "" for one server.
			server := func(k string) string { return serverOf(t, client, prefix+k) }
			// One call held in flight on each server of the keys, taking
			// its one turn.
			var servers []string
			for i := range n {
				if !slices.Contains(servers, server(key(i))) {
					servers = append(servers, server(key(i)))
				}
			}
			var firsts []<-chan outcome
			var opens []func()
			for _, srv := range servers {
				k := ""
				for j := 0; k == ""; j++ {
					if f := fmt.Sprint("first", j); server(f) == srv {
						k = f
					}
				}
				opens = append(opens, hook.armCall())
				firsts = append(firsts, goAllow(t.Context(), s, k))
				<-hook.entered
			}
			answers := make([]<-chan outcome, n)
			for i := range n {
				answers[i] = goAllow(t.Context(), s, key(i))
				waitQueued(t, s, i+1) // in this order
			}
			for _, open := range opens {
				open()
			}
			for _, first := range firsts {
				if o := <-first; o.err != nil || !o.d.Allowed {
					t.Fatalf("a call in flight: %+v, %v; want allowed", o.d, o.err)
				}
			}
			for i, ch := range answers {
				o := <-ch
				left := burst - spent(i) - 1
				want := keyrate.Decision{Allowed: left >= 0, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: max(left, 0),
					ResetAfter: time.Duration(burst-max(left, 0)) * time.Hour, WindowResetAfter: time.Duration(burst-max(left, 0)) * time.Hour}
				if left < 0 {
					want.RetryAfter = time.Hour
				}
				if o.err != nil || o.d != want {
					t.Errorf("key %q (%d spent): %+v, %v; want %+v", key(i), spent(i), o.d, o.err, want)
				}
			}
			// The pipelines each server's queue makes: the oldest leads
			// up to 5, the rest staying queued in order (a leader alone
			// sends alone, not as a pipeline). Servers' pipelines go
			// out concurrently: they are compared server by server.
			want := map[string][][]string{}
			for _, srv := range servers {
				var queue []string
				for i := range n {
					if server(key(i)) == srv {
						queue = append(queue, prefix+key(i))
					}
				}
				for len(queue) > 0 {
					batch := queue[:min(5, len(queue))]
					if len(batch) > 1 {
						want[srv] = append(want[srv], batch)
					}
					queue = queue[len(batch):]
				}
			}
			got := map[string][][]string{}
			for _, keys := range hook.pipelineKeys() {
				srv := server(keys[0][len(prefix):])
				got[srv] = append(got[srv], keys)
			}
			for _, srv := range servers {
				if !slices.EqualFunc(got[srv], want[srv], slices.Equal) {
					t.Errorf("server %q: pipelines of the keys %q; want %q", srv, got[srv], want[srv])
				}
			}
			if len(got) > len(servers) {
				t.Errorf("pipelines of the keys %q; want those of %q only", got, servers)
			}
			if b.name == "server" && !slices.Equal(hook.pipelines(), []int{5, 5, 2}) {
				t.Errorf("pipelines of %v calls; want 5, 5 and 2", hook.pipelines())
			}
			if got := s.Stats().Calls - before; got != uint64(n+len(servers)) {
				t.Errorf("Stats.Calls counted %d calls; want %d", got, n+len(servers))
			}
			if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
				t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
			}
			if n := redisbucket.PipelineServers(s); n != 0 {
				t.Errorf("after the calls, turns kept for %d servers; want none", n)
			}
		})
	}
}

// TestPipelineWaiterLeaves: a queued call whose context ends returns at
// once with the context's error, while the call ahead of it is still held
// in flight; and a call whose context ends while its command is in a
// pipeline (held there by a hook) returns at once too, while the leader
// of that pipeline gets its own answer when the pipeline ends, without
// waiting for the call that left. The call that left spent its token in
// Redis (the documented under-admission), and after it all, no turn is
// held.
func TestPipelineWaiterLeaves(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	var errs faultErrors
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}), redisbucket.WithOnError(errs.add))

	open := hook.armCall()
	first := goAllow(t.Context(), s, "first")
	<-hook.entered

	// Queued, then cancelled: it returns while "first" is held.
	ctx, cancel := context.WithCancel(t.Context())
	queued := goAllow(ctx, s, "queued")
	waitQueued(t, s, 1)
	cancel()
	if o := within(t, "the queued call whose context ended", queued); !errors.Is(o.err, context.Canceled) || o.d != (keyrate.Decision{}) {
		t.Fatalf("a queued call whose context ended: %+v, %v; want a zero Decision and context.Canceled", o.d, o.err)
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 1 {
		t.Fatalf("after the queued call left: %d queued, %d in flight; want 0 and the 1 held", q, f)
	}

	// Taken into a pipeline, which is held; then cancelled.
	leader := goAllow(t.Context(), s, "leader")
	waitQueued(t, s, 1)
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	taken := goAllow(ctx, s, "taken")
	waitQueued(t, s, 2)
	openPipe := hook.armPipe()
	open() // "first" ends, and hands its turn to "leader", which sends both
	if o := <-first; o.err != nil || !o.d.Allowed {
		t.Fatalf("the first call: %+v, %v; want allowed", o.d, o.err)
	}
	<-hook.entered
	cancel()
	if o := within(t, "the call whose context ended in a pipeline", taken); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("a call whose context ended in a held pipeline: %+v, %v; want context.Canceled", o.d, o.err)
	}
	openPipe()
	if o := within(t, "the pipeline's leader", leader); o.err != nil || !o.d.Allowed || o.d.Remaining != 4 {
		t.Fatalf("the pipeline's leader: %+v, %v; want allowed with 4 left", o.d, o.err)
	}
	if got := hook.pipelines(); !slices.Equal(got, []int{2}) {
		t.Fatalf("pipelines of %v calls; want one of 2", got)
	}
	if d := s.Peek("taken"); d.Remaining != 4 {
		t.Errorf("Peek(\"taken\") = %+v; want 4 left: the call that left spent its token in Redis", d)
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
	}
	if st := s.Stats(); st.Errors != 0 || st.Degraded != 0 || errs.n.Load() != 0 {
		t.Errorf("callers that gave up counted as an outage: Stats %+v, %d OnError calls", st, errs.n.Load())
	}
}

// TestPipelineNoScript: a pipeline that reaches a server without the
// script (flushed while the pipeline is held by a hook) gets NOSCRIPT for
// each call, and each call sends the script itself (EVAL) and gets its
// own key's answer.
func TestPipelineNoScript(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	hook := newGateHook()
	client.AddHook(hook)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	if d, err := s.AllowN("k2", 2); err != nil || !d.Allowed { // loads the script; k2 has 3 left
		t.Fatalf("AllowN = %+v, %v", d, err)
	}
	answers, openPipe := flushedPipeline(t, srv, s, hook, func(i int) (keyrate.Decision, error) {
		return s.AllowNContext(t.Context(), fmt.Sprint("k", i), 1)
	})
	openPipe()
	for i, ch := range answers {
		want := 4
		if i == 2 {
			want = 2
		}
		if o := within(t, "a call of the pipeline", ch); o.err != nil || !o.d.Allowed || o.d.Remaining != want {
			t.Errorf("key k%d: %+v, %v; want allowed with %d left", i, o.d, o.err, want)
		}
	}
	if got := hook.pipelines(); !slices.Equal(got, []int{4}) {
		t.Errorf("pipelines of %v calls; want one of 4", got)
	}
}

// TestPipelinePanic: when the client panics sending a pipeline (here a
// hook does), the panic is the leader's, whose goroutine it unwinds; the
// other calls of the pipeline fail (by the failure policy, as an outage)
// instead of waiting forever, and the turn goes on: the next call is
// answered by Redis.
func TestPipelinePanic(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	open := hook.armCall()
	first := goAllow(t.Context(), s, "first")
	<-hook.entered
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_, _ = s.AllowN("leader", 1)
	}()
	waitQueued(t, s, 1)
	other := goAllow(t.Context(), s, "other")
	waitQueued(t, s, 2)
	hook.panics.Store(true)
	open()
	within(t, "the first call", first)
	select {
	case r := <-recovered:
		if r != "a hook's panic" {
			t.Fatalf("the leader recovered %v; want the hook's panic", r)
		}
	case <-time.After(answerWithin):
		t.Fatalf("the leader did not return within %v", answerWithin)
	}
	if o := within(t, "the other call of the pipeline", other); o.d.Allowed || !errors.Is(o.err, redisbucket.ErrUnavailable) {
		t.Fatalf("the other call of the panicked pipeline: %+v, %v; want denied with ErrUnavailable", o.d, o.err)
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Fatalf("after the panic, %d queued and %d in flight; want none", q, f)
	}
	if d, err := s.AllowN("after", 1); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("AllowN after the panic = %+v, %v; want Redis's answer, allowed with 4 left", d, err)
	}
}

// TestPipelineStoppedServer: with the server stopped (SIGSTOP: nothing
// answers), 40 concurrent calls through one turn, in pipelines of one
// (each handed the turn in turn) or of up to 64, each answer by the
// failure policy within their own timeout: none waits for the turns
// ahead of it (40 timeouts would be 4s, past hangBound), nor for a
// pipeline without a deadline (forever: the test then resumes the
// server, to fail rather than hang).
func TestPipelineStoppedServer(t *testing.T) {
	for _, batch := range []int{1, 64} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			srv := server(t)
			client := newClient(t, srv.Addr())
			s := mustNew(t, client, faultLimit, redisbucket.WithPrefix(uniquePrefix(t)),
				redisbucket.WithTimeout(faultTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
				redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: batch}))
			answered(t, s, keys("warm"))
			before := s.Stats()
			srv.Stop(t)
			const calls = 40
			var wg sync.WaitGroup
			var longest atomic.Int64
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					if i%2 == 1 { // a caller's deadline later than the timeout: the store's still bounds it
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, time.Hour)
						defer cancel()
					}
					took := timed(t, "AllowN on a stopped server", func() {
						d, err := s.AllowNContext(ctx, fmt.Sprint("k", i), 1)
						if d.Allowed || !errors.Is(err, redisbucket.ErrUnavailable) || !isTimeout(err) {
							t.Errorf("AllowN on a stopped server: %+v, %v; want denied, ErrUnavailable and a timeout", d, err)
						}
					})
					for old := longest.Load(); int64(took) > old && !longest.CompareAndSwap(old, int64(took)); old = longest.Load() {
					}
				}()
			}
			finished(t, &wg, func() { srv.Cont(t) })
			t.Logf("the longest call took %v (timeout %v)", time.Duration(longest.Load()), faultTimeout)
			if st := s.Stats(); st.Errors-before.Errors != calls || st.Degraded-before.Degraded != calls {
				t.Errorf("Stats went from %+v to %+v; want %d more errors and degraded answers", before, st, calls)
			}
		})
	}
}

// finished waits for wg; if that takes hangBound, it fails t, calls
// unstick, and waits for wg again.
func finished(t *testing.T, wg *sync.WaitGroup, unstick func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Errorf("calls still running after %v: they hung", hangBound)
		unstick()
		<-done
	}
}

// within returns what ch gives, or fails t if that takes answerWithin:
// a call that must return at once hung.
func within(t *testing.T, what string, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(answerWithin):
		t.Fatalf("%s did not return within %v", what, answerWithin)
		return outcome{}
	}
}

// TestPipelineStress: goroutines on a few keys of two stores sharing a
// frozen clock, with pipelining and contexts that end at random, admit
// no more than the burst of each key (exactly the burst when no context
// ends), leave no turn held, and no goroutine running once the clients
// are closed.
func TestPipelineStress(t *testing.T) {
	srv := server(t)
	ignore := goleak.IgnoreCurrent() // the server's own
	const keys, burst, goroutines, calls = 3, 40, 16, 30
	for _, cancels := range []bool{false, true} {
		t.Run(fmt.Sprint("cancels=", cancels), func(t *testing.T) {
			prefix := uniquePrefix(t)
			var stores []*redisbucket.Store
			var clients []*redis.Client
			for range 2 {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
				clients = append(clients, c)
				stores = append(stores, mustNew(t, c, keyrate.PerHour(1).WithBurst(burst), redisbucket.WithPrefix(prefix),
					redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
					redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4})))
			}
			var admitted [keys]atomic.Int64
			var wg sync.WaitGroup
			release := make(chan struct{})
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[g%2]
					r := rand.New(rand.NewPCG(uint64(g), 1))
					<-release
					for i := range calls {
						ctx, cancel := context.WithCancel(context.Background())
						if cancels && r.IntN(3) == 0 {
							go cancel() // ends at any point of the call
						}
						k := (g + i) % keys
						d, err := s.AllowNContext(ctx, fmt.Sprint("k", k), 1)
						cancel()
						switch {
						case err == nil && d.Allowed:
							admitted[k].Add(1)
						case err != nil && !(cancels && errors.Is(err, context.Canceled)):
							t.Errorf("AllowN: %+v, %v", d, err)
						}
					}
				}()
			}
			close(release)
			wg.Wait()
			for k := range admitted {
				got := admitted[k].Load()
				if got > burst || (!cancels && got != burst) {
					t.Errorf("key %d: %d admitted; want exactly the burst %d without cancels, at most it with", k, got, burst)
				}
			}
			for _, s := range stores {
				if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
					t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
				}
			}
			for _, c := range clients {
				_ = c.Close()
			}
		})
	}
	if err := leaktest.Find(ignore); err != nil {
		t.Error(err)
	}
}

// flushedPipeline holds a call ("first") in the store's one turn (s has
// InFlight 1) with gate, queues four calls behind it (call(i) for each),
// lets "first" through and holds the four's pipeline before it is sent,
// then flushes srv's script cache: the pipeline meets NOSCRIPT once the
// caller calls openPipe. It returns the four calls' outcomes.
func flushedPipeline(t *testing.T, srv *redistest.Server, s *redisbucket.Store, gate *gateHook, call func(i int) (keyrate.Decision, error)) (answers []<-chan outcome, openPipe func()) {
	t.Helper()
	open := gate.armCall()
	first := goAllow(t.Context(), s, "first")
	<-gate.entered
	answers = make([]<-chan outcome, 4)
	for i := range answers {
		ch := make(chan outcome, 1)
		go func() {
			d, err := call(i)
			ch <- outcome{d, err}
		}()
		answers[i] = ch
		waitQueued(t, s, i+1)
	}
	openPipe = gate.armPipe()
	open()
	if o := within(t, "the first call", first); o.err != nil || !o.d.Allowed {
		t.Fatalf("the first call: %+v, %v", o.d, o.err)
	}
	<-gate.entered
	if err := newClient(t, srv.Addr()).ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	return answers, openPipe
}
