package redisbucket_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestPipelineRepliesToTheirCallers: goroutines of two stores (two
// processes) on one server and on a Cluster, each spending its own key
// at its own cost, through one turn (on the Cluster, one per master) and
// pipelines of up to 4 calls, with contexts that end at random and
// deadlines of their own shorter than the store's timeout: every
// answer a call gets is its own key's, at its own cost (Remaining is
// Burst less a multiple of that cost, and falls at every allowed call),
// no key admits past its Burst, and no turn stays taken (nor, on the
// Cluster, any master's turns kept). A reply handed to the wrong waiter,
// or a waiter's command sent twice or not at all while it is told it
// was, shows in Remaining.
func TestPipelineRepliesToTheirCallers(t *testing.T) {
	const goroutines, calls, burst = 12, 25, 1000
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			limit := keyrate.PerHour(1).WithBurst(burst)
			var stores []*redisbucket.Store
			hook := newGateHook() // armed never: it counts the pipelines
			for range 2 {
				c := b.client(t)
				addHook(t, c, hook)
				stores = append(stores, mustNew(t, c, limit, redisbucket.WithPrefix(prefix),
					redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
					redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4})))
			}
			var wg sync.WaitGroup
			release := make(chan struct{})
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 7))
					key, cost := fmt.Sprint("g", g), g+1
					admitted, last := 0, burst
					<-release
					for i := range calls {
						s := stores[(g+i)%2]
						ctx, cancel := context.WithCancel(context.Background())
						if r.IntN(3) == 0 {
							go cancel()
						}
						cancelTimeout := context.CancelFunc(func() {})
						if r.IntN(3) == 0 { // a deadline of its caller's, shorter than the store's (a pipeline's bound for those it leads)
							ctx, cancelTimeout = context.WithTimeout(ctx, slowTimeout/time.Duration(2+r.IntN(8)))
						}
						d, err := s.AllowNContext(ctx, key, cost)
						cancelTimeout()
						cancel()
						switch {
						case errors.Is(err, context.Canceled):
							continue // may or may not have spent
						case err != nil:
							t.Errorf("%s: AllowN: %+v, %v", key, d, err)
							return
						case (burst-d.Remaining)%cost != 0 || (d.Allowed && d.Remaining >= last):
							t.Errorf("%s (cost %d): %+v after Remaining %d: another call's answer", key, cost, d, last)
							return
						}
						if d.Allowed {
							admitted += cost
							last = d.Remaining
						}
					}
					if admitted > burst {
						t.Errorf("%s: %d admitted, past the burst %d", key, admitted, burst)
					}
				}()
			}
			close(release)
			wg.Wait()
			for _, s := range stores {
				if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
					t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
				}
				if n := redisbucket.PipelineServers(s); n != 0 {
					t.Errorf("after the calls, turns kept for %d servers; want none", n)
				}
			}
			if len(hook.pipelines()) == 0 {
				t.Errorf("%d goroutines through one turn sent no pipeline: the test tests nothing", goroutines)
			}
		})
	}
}

// TestPipelineHaste: a queued call goes in a pipeline only if the
// leader's deadline is at or past the middle of its own wait. Callers
// whose deadlines are alike share pipelines, even deadlines shorter than
// the store's timeout (as a proxy's timeout on every request is): before,
// such a call always went alone, so that under Envoy's deadlines nothing
// was ever pipelined and InFlight bounded the calls in flight. A caller
// in haste (a deadline far shorter than the others') leads only the calls
// its deadline leaves half their wait; the others go in the next
// pipeline, led by the oldest of them. Each gets its own answer.
func TestPipelineHaste(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	prefix := uniquePrefix(t)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(prefix),
		redisbucket.WithTimeout(time.Minute), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	open := hook.armCall()
	first := goAllow(t.Context(), s, "first")
	<-hook.entered
	hasty, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a third of the store's minute
	defer cancel()
	fifty, cancel50 := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel50()
	var answers []<-chan outcome
	for i, c := range []struct {
		ctx context.Context
		key string
	}{{hasty, "hasty"}, {t.Context(), "a"}, {hasty, "hasty2"}, {fifty, "fifty"}, {t.Context(), "b"}, {t.Context(), "c"}} {
		answers = append(answers, goAllow(c.ctx, s, c.key))
		waitQueued(t, s, i+1)
	}
	open()
	within(t, "the first call", first)
	for i, ch := range answers {
		if o := within(t, "a queued call", ch); o.err != nil || !o.d.Allowed || o.d.Remaining != 4 {
			t.Errorf("queued call %d: %+v, %v; want allowed with 4 left", i, o.d, o.err)
		}
	}
	// "hasty" leads: its deadline (20 s) is past the middle of "hasty2"'s
	// wait (10 s), short of those of the calls of the store's minute (30 s)
	// and of "fifty" (25 s), which "a" leads next.
	want := [][]string{{prefix + "hasty", prefix + "hasty2"}, {prefix + "a", prefix + "fifty", prefix + "b", prefix + "c"}}
	if got := hook.pipelineKeys(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pipelines of the keys %q; want %q", got, want)
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
	}
}

// TestPipelineLeaderCancelled: the caller of a pipeline's leader giving
// up while the pipeline is in flight (held by a hook) fails none of the
// other calls in it: each gets Redis's answer. (The pipeline is bounded
// by the leader's deadline, not by its caller's cancellation.)
func TestPipelineLeaderCancelled(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(5), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	open := hook.armCall()
	first := goAllow(t.Context(), s, "first")
	<-hook.entered
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	leader := goAllow(ctx, s, "leader")
	waitQueued(t, s, 1)
	others := []<-chan outcome{goAllow(t.Context(), s, "o1"), goAllow(context.Background(), s, "o2")}
	waitQueued(t, s, 3)
	openPipe := hook.armPipe()
	open()
	within(t, "the first call", first)
	<-hook.entered // the leader's pipeline of 3, held
	cancel()
	openPipe()
	if o := within(t, "the leader", leader); o.err != nil && !errors.Is(o.err, context.Canceled) {
		t.Errorf("the leader: %+v, %v; want its answer or context.Canceled", o.d, o.err)
	}
	for i, ch := range others {
		if o := within(t, "a call of the pipeline", ch); o.err != nil || !o.d.Allowed || o.d.Remaining != 4 {
			t.Errorf("call %d of the pipeline whose leader gave up: %+v, %v; want Redis's answer, allowed with 4 left", i, o.d, o.err)
		}
	}
	if got := hook.pipelines(); !slices.Equal(got, []int{3}) {
		t.Errorf("pipelines of %v calls; want one of 3", got)
	}
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
	}
}

// TestPipelineHandoffRace: a queued call handed the turn at the moment
// its context ends (both released together, many times over, in either
// order) hands the turn on: the call behind it is answered by Redis, and
// no turn stays taken. A turn lost there would leave every later call
// queued to its timeout; one duplicated, two calls in flight on one turn.
func TestPipelineHandoffRace(t *testing.T) {
	client := newClient(t, server(t).Addr())
	hook := newGateHook()
	client.AddHook(hook)
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(1000), redisbucket.WithPrefix(uniquePrefix(t)),
		redisbucket.WithTimeout(slowTimeout), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1}))
	const rounds = 40
	for i := range rounds {
		open := hook.armCall()
		first := goAllow(t.Context(), s, "first")
		<-hook.entered
		ctx, cancel := context.WithCancel(t.Context())
		racer := goAllow(ctx, s, "racer")
		waitQueued(t, s, 1)
		behind := goAllow(t.Context(), s, "behind")
		waitQueued(t, s, 2)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); open() }()
		go func() { defer wg.Done(); cancel() }()
		wg.Wait()
		within(t, "the first call", first)
		if o := within(t, "the racing call", racer); o.err != nil && !errors.Is(o.err, context.Canceled) {
			t.Fatalf("round %d: the call whose context ended as it was handed the turn: %+v, %v", i, o.d, o.err)
		}
		if o := within(t, "the call behind", behind); o.err != nil || !o.d.Allowed {
			t.Fatalf("round %d: the call behind: %+v, %v; want Redis's answer, allowed", i, o.d, o.err)
		}
		if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
			t.Fatalf("round %d: %d queued and %d in flight; want none", i, q, f)
		}
	}
	if st := s.Stats(); st.Errors != 0 || st.Degraded != 0 {
		t.Errorf("Stats %+v: callers that gave up counted as an outage", st)
	}
}

// keyHold is a go-redis hook that holds every EVALSHA of one Redis key,
// sent alone or in a pipeline, until release, like a hung server: it says
// so on entered.
type keyHold struct {
	key     string
	gate    chan struct{}
	once    sync.Once
	entered chan struct{}
}

func newKeyHold(key string) *keyHold {
	return &keyHold{key: key, gate: make(chan struct{}), entered: make(chan struct{}, 16)}
}

func (h *keyHold) release() { h.once.Do(func() { close(h.gate) }) }

func (h *keyHold) hold(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if args := c.Args(); c.Name() == "evalsha" && len(args) > 3 && args[3] == h.key {
			select {
			case <-h.gate:
			default:
				h.entered <- struct{}{}
				<-h.gate
			}
			return
		}
	}
}

func (h *keyHold) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *keyHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold(cmd)
		return next(ctx, cmd)
	}
}

func (h *keyHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds...)
		return next(ctx, cmds)
	}
}

// TestPipelineHungMasterDelaysOthers: on a Redis Cluster, with
// WithPipelining's defaults (2 calls in flight), two calls to a master
// that hangs (a hook holds them) do not hold up a call to another
// master, which gets Redis's answer at once, as WithPipelining promises
// ("a master that fails or hangs delays no call to another"): each master
// has turns of its own (batcher.nodes, batch.go). With the turns the
// store's, the two hung calls took both, and the call to the healthy
// master waited in the queue to its own timeout (2s) and got the failure
// policy's answer: under load, every call to the healthy masters of a
// Cluster failed while one master hung. Once the hung calls end, no
// master's turns are kept.
func TestPipelineHungMasterDelaysOthers(t *testing.T) {
	client := newClusterClient(t, redistest.SharedCluster(t))
	prefix := uniquePrefix(t)
	master := func(key string) string {
		m, err := client.MasterForKey(t.Context(), prefix+key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	hung, healthy := "hung", ""
	for i := 0; healthy == ""; i++ {
		if k := fmt.Sprint("healthy", i); master(k) != master(hung) {
			healthy = k
		}
	}
	s := mustNew(t, client, keyrate.PerHour(1).WithBurst(20), redisbucket.WithPrefix(prefix),
		redisbucket.WithTimeout(2*time.Second), redisbucket.WithTimeSource(clock.NewManual(start)),
		redisbucket.WithPipelining(redisbucket.Pipelining{}))
	for _, k := range []string{hung, healthy} {
		if d, err := s.AllowN(k, 1); err != nil || !d.Allowed {
			t.Fatalf("AllowN(%q) = %+v, %v; want allowed", k, d, err)
		}
	}
	hold := newKeyHold(prefix + hung) // after the calls that load the script on both masters
	client.AddHook(hold)
	defer hold.release()
	h1, h2 := goAllow(t.Context(), s, hung), goAllow(t.Context(), s, hung)
	<-hold.entered
	<-hold.entered
	select {
	case o := <-goAllow(t.Context(), s, healthy):
		if o.err != nil || !o.d.Allowed {
			t.Errorf("a call to a healthy master, while another master hangs: %+v, %v; want Redis's answer, allowed", o.d, o.err)
		}
	case <-time.After(heldFor):
		t.Errorf("a call to a healthy master waited %v for calls to a hung one", heldFor)
	}
	hold.release()
	within(t, "a held call", h1)
	within(t, "a held call", h2)
	if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
		t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
	}
	if n := redisbucket.PipelineServers(s); n != 0 {
		t.Errorf("after the calls, turns kept for %d masters; want none", n)
	}
}
