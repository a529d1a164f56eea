package mutexbucket_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/mutexbucket"
)

// start is the clocks' first reading.
const start = time.Hour

// denyAlgorithms are the one-window algorithms whose deny is decided
// without the lock: the token bucket's inlined arithmetic and the window
// algorithms' rules.Rule.Reserve take different paths.
var denyAlgorithms = []keyrate.Algorithm{keyrate.TokenBucket, keyrate.FixedWindow, keyrate.SlidingWindow}

// twoPerSecond is the tests' limit under algorithm alg.
func twoPerSecond(alg keyrate.Algorithm) keyrate.Limit {
	return keyrate.Limit{Rate: 2, Per: time.Second, Burst: 2, Algorithm: alg}
}

// newStore returns a store of limit on clk, with the options opts.
func newStore(t *testing.T, limit keyrate.Limit, clk clock.Clock, opts ...keyrate.Option) *mutexbucket.Store {
	t.Helper()
	s, err := mutexbucket.New(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// empty spends every token of key.
func empty(t *testing.T, l keyrate.Limiter, key string) {
	t.Helper()
	if d, err := l.AllowN(key, 2); err != nil || !d.Allowed {
		t.Fatalf("AllowN(%q, 2) on a full bucket = %+v, %v", key, d, err)
	}
}

// withinAMinute runs f on a goroutine of its own and fails the test if it
// has not returned within a minute: f blocked on a lock the test holds.
func withinAMinute(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatalf("%s blocked on the bucket's lock, which the test holds: the deny took the lock", what)
	}
}

// TestDenyTakesNoLock: a request that the bucket's state already denies
// returns while the test holds the bucket's lock, with the Decision,
// Reservation and observer events that the same store gives once the lock
// is free. On the old code, which decided every request under the lock,
// the first call blocks.
func TestDenyTakesNoLock(t *testing.T) {
	for _, alg := range denyAlgorithms {
		t.Run(fmt.Sprint("alg=", alg), func(t *testing.T) {
			clk := clock.NewManual(start)
			var events []keyrate.Event
			var mu sync.Mutex
			obs := keyrate.ObserverFunc(func(e keyrate.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
			plain := newStore(t, twoPerSecond(alg), clk)
			observed := newStore(t, twoPerSecond(alg), clk, keyrate.WithObserver(obs))
			for _, s := range []*mutexbucket.Store{plain, observed} {
				empty(t, s, "k")
			}
			mu.Lock()
			events = nil
			mu.Unlock()
			clk.Advance(100 * time.Millisecond) // not a token's worth: still denied

			type answer struct {
				allow, observedAllow bool
				d, observed          keyrate.Decision
				errs                 [3]error
				reserved             bool
				delay                time.Duration
				events               []keyrate.Event
			}
			ask := func() (a answer) {
				a.allow = plain.Allow("k")
				a.d, a.errs[0] = plain.AllowN("k", 1)
				r, err := plain.Reserve("k", 1, 100*time.Millisecond) // its slot is further away
				a.reserved, a.delay, a.errs[1] = r.OK(), r.Delay(), err
				a.observed, a.errs[2] = observed.AllowN("k", 1)
				a.observedAllow = observed.Allow("k")
				mu.Lock()
				a.events, events = events, nil
				mu.Unlock()
				return a
			}

			var held answer
			var locks []mutexbucket.LockedBucket
			for _, s := range []*mutexbucket.Store{plain, observed} {
				l, ok := mutexbucket.LockBucket(s, "k")
				if !ok {
					t.Fatal("the store holds no bucket for k")
				}
				locks = append(locks, l)
			}
			withinAMinute(t, "a denied request", func() { held = ask() })
			for _, l := range locks {
				l.Unlock()
			}
			free := ask()

			if held.allow || held.d.Allowed || held.reserved || held.observed.Allowed || held.observedAllow {
				t.Fatalf("a request on an empty bucket was allowed: %+v", held)
			}
			if fmt.Sprint(held) != fmt.Sprint(free) {
				t.Fatalf("denied under the held lock:\n%+v\nwith the lock free:\n%+v\nwant the same answers", held, free)
			}
			if len(held.events) != 2 || held.events[0].Allowed || held.events[1].Allowed {
				t.Fatalf("observer events of the denied requests = %+v, want 2 denies", held.events)
			}
		})
	}
}

// reference returns the Decision of AllowN(k, 1) on a store of limit on
// clk after steps, run on it in order: what a store that decides every
// request under its lock answers after the same history.
func reference(t *testing.T, limit keyrate.Limit, clk clock.Clock, steps ...func(l *mutexbucket.Store)) keyrate.Decision {
	t.Helper()
	ref := newStore(t, limit, clk)
	for _, f := range steps {
		f(ref)
	}
	d, err := ref.AllowN("k", 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// spendOne and refundOne are the steps of the state changes below.
func spendOne(l *mutexbucket.Store) { l.AllowN("k", 1) }

func refundOne(l *mutexbucket.Store) { l.Refund("k", 1) }

// TestDenyStateChangedAfterReading: the state a request decides from is
// read after its clock reading, so a change between the two counts. A
// spend made there turns the request's allow into a deny (taken without
// the lock: the state read proves it) and a refund made there turns a
// deny into an allow, each with the Decision of a store that decides
// under its lock after the same history. A store that decided from a
// state read before the clock would allow both spends of the one token
// left, or deny the refunded one. The HookClock runs the change at the
// request's reading, every run.
func TestDenyStateChangedAfterReading(t *testing.T) {
	for _, alg := range denyAlgorithms {
		limit := twoPerSecond(alg)
		for _, c := range []struct {
			name   string
			before []func(*mutexbucket.Store) // the history before the request
			change func(*mutexbucket.Store)   // made after its reading
		}{
			{"spent", []func(*mutexbucket.Store){spendOne}, spendOne},
			{"refunded", []func(*mutexbucket.Store){spendOne, spendOne}, refundOne},
		} {
			t.Run(fmt.Sprintf("alg=%v/%s", alg, c.name), func(t *testing.T) {
				clk := conformance.NewHookClock(start)
				s := newStore(t, limit, clk)
				for _, f := range c.before {
					f(s)
				}
				clk.AtNextReading(func() { c.change(s) })
				got, err := s.AllowN("k", 1)
				if !clk.Fired() {
					t.Fatal("the change did not run at the request's reading: the interleaving was not driven")
				}
				want := reference(t, limit, clock.NewManual(start), append(c.before, c.change)...)
				if err != nil || got != want {
					t.Fatalf("AllowN after a change at its reading = %+v, %v; want %+v", got, err, want)
				}
			})
		}
	}
}

// TestDenyStateChangedBeforeLock: a request whose read state allows it
// takes the lock and decides again from the state under it. The test
// holds the lock while the request reads a state with one token left,
// waits for the request to queue on the lock, spends that token under the
// lock, and lets go: the request is denied, as a store that read the state
// under the lock would deny it. A store that wrote the state it computed
// from its lock-free read would admit both spends of the one token.
func TestDenyStateChangedBeforeLock(t *testing.T) {
	if !mutexbucket.MutexLayoutOK() {
		t.Skip("sync.Mutex's layout changed: the test cannot see a goroutine queue on it")
	}
	for _, alg := range denyAlgorithms {
		t.Run(fmt.Sprint("alg=", alg), func(t *testing.T) {
			limit := twoPerSecond(alg)
			clk := clock.NewManual(start)
			s := newStore(t, limit, clk)
			spendOne(s)
			l, ok := mutexbucket.LockBucket(s, "k")
			if !ok {
				t.Fatal("the store holds no bucket for k")
			}
			type result struct {
				d   keyrate.Decision
				err error
			}
			done := make(chan result)
			go func() {
				d, err := s.AllowN("k", 1)
				done <- result{d, err}
			}()
			for l.Waiters() == 0 { // the request read one token left, and waits for the lock
				runtime.Gosched()
			}
			if !l.Spend(1) {
				t.Fatal("the spend under the held lock was denied: the bucket held no token")
			}
			l.Unlock()
			got := <-done
			want := reference(t, limit, clk, spendOne, spendOne)
			if got.err != nil || got.d != want || want.Allowed {
				t.Fatalf("AllowN queued on the lock while its token was spent = %+v, %v; want %+v", got.d, got.err, want)
			}
		})
	}
}

// TestDenyStress: goroutines spend from, and give back to, one key on a
// frozen clock, at several GOMAXPROCS: a lock-free deny must never let the
// key admit more than its burst and what was given back, and every denied
// Decision must say no token is left.
func TestDenyStress(t *testing.T) {
	const burst, goroutines = 32, 8
	n := 2000
	if testing.Short() {
		n = 200
	}
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			clk := clock.NewManual(start)
			s := newStore(t, keyrate.Limit{Rate: 1, Per: time.Hour, Burst: burst}, clk)
			var admitted, refunded atomic.Int64
			var bad atomic.Pointer[keyrate.Decision]
			var ready, done sync.WaitGroup
			release := make(chan struct{})
			ready.Add(goroutines)
			done.Add(goroutines)
			for g := 0; g < goroutines; g++ {
				go func() {
					defer done.Done()
					ready.Done()
					<-release
					for i := 0; i < n; i++ {
						d, err := s.AllowN("k", 1)
						switch {
						case err != nil:
							bad.Store(&keyrate.Decision{})
						case d.Allowed:
							admitted.Add(1)
							if (g+i)%4 == 0 {
								s.Refund("k", 1)
								refunded.Add(1)
							}
						case d.Remaining != 0 || d.RetryAfter <= 0:
							bad.Store(&d)
						}
					}
				}()
			}
			ready.Wait()
			close(release)
			done.Wait()
			if d := bad.Load(); d != nil {
				t.Fatalf("a denied request's Decision = %+v, want no token left and a wait", *d)
			}
			if a, r := admitted.Load(), refunded.Load(); a > burst+r {
				t.Fatalf("admitted %d on a frozen clock with burst %d and %d given back", a, burst, r)
			}
		})
	}
}
