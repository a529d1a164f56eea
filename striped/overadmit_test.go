package striped_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/striped"
)

// TestNoOverAdmissionUnderChurn spends from one hot key on every core at
// once, on a frozen clock, while other goroutines churn the same (only)
// stripe: new keys that grow its table and, refunded full, are evicted by
// the sampling on insertion (shrinking the table and compacting its
// arena), whole sweeps, the default policy replaced by an equal one (so
// that the hot key is carried to a new version on its next spend), and the
// hot key moved between two policies of the same limit by the policy
// function; and all that again with a cap of 64 keys, where every new
// key must find room (all but the hot key and one other are full). The
// clock never moves, so the hot key must admit exactly its
// burst: more is over-admission (a lost update, or an eviction or a carry
// that handed it a fresh bucket), less a lost key; and at rest Len and
// Stats must count the keys the tables hold. Bounded by iteration
// counts, not by time. Under each algorithm, the sliding log's included:
// on a frozen clock each admits exactly its burst (its rate, for a
// window).
func TestNoOverAdmissionUnderChurn(t *testing.T) {
	const burst = 50
	for _, limit := range []keyrate.Limit{
		{Rate: 1, Per: time.Hour, Burst: burst},
		keyrate.Limit{Rate: burst, Per: time.Hour}.Using(keyrate.SlidingLog),
		keyrate.Limit{Rate: burst, Per: time.Hour}.Using(keyrate.FixedWindow),
		keyrate.Limit{Rate: burst, Per: time.Hour}.Using(keyrate.SlidingWindow),
	} {
		t.Run(fmt.Sprint("alg=", limit.Algorithm), func(t *testing.T) { testNoOverAdmissionUnderChurn(t, limit, burst) })
	}
}

func testNoOverAdmissionUnderChurn(t *testing.T, limit keyrate.Limit, burst int64) {
	for _, hashed := range []bool{false, true} {
		for _, moves := range []bool{false, true} {
			for _, capped := range []bool{false, true} {
				t.Run(fmt.Sprintf("hashed=%v/moves=%v/capped=%v", hashed, moves, capped), func(t *testing.T) {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
					var side atomic.Bool // the hot key's policy: "a" or "b"
					opts := []keyrate.Option{
						keyrate.WithClock(clock.NewManual(time.Hour)),
						striped.WithStripes(1),
						keyrate.WithPolicies(keyrate.Policy{Name: "a", Limits: []keyrate.Limit{limit}}, keyrate.Policy{Name: "b", Limits: []keyrate.Limit{limit}}),
					}
					if moves {
						opts = append(opts, keyrate.WithPolicyFunc(func(key string) string {
							if key != "hot-key-0123" {
								return ""
							}
							if side.Load() {
								return "b"
							}
							return "a"
						}))
					}
					if hashed {
						opts = append(opts, keyrate.WithHashedKeys())
					}
					if capped { // room for the hot key and 63 others, all but one of them full
						opts = append(opts, keyrate.WithMaxKeys(64))
					}
					s, err := striped.New(limit, opts...)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					const spenders, spends = 4, 3000
					var admitted atomic.Int64
					var start, spending, churning sync.WaitGroup
					start.Add(1)
					for range spenders {
						spending.Add(1)
						go func() {
							defer spending.Done()
							start.Wait()
							for j := range spends {
								if j%3 == 2 {
									if r, err := s.Reserve("hot-key-0123", 1, 0); err == nil && r.OK() {
										admitted.Add(1)
									}
								} else if s.Allow("hot-key-0123") {
									admitted.Add(1)
								}
							}
						}()
					}
					var stop atomic.Bool
					churning.Add(3)
					go func() { // new keys, refunded full: growth, sampling, shrinking
						defer churning.Done()
						start.Wait()
						for i := 0; !stop.Load() || i < 2000; i++ {
							k := fmt.Sprintf("churn-%d", i)
							if !s.Allow(k) {
								t.Errorf("new key %q denied", k)
								return
							}
							s.Refund(k, 1)
						}
					}()
					go func() { // whole sweeps
						defer churning.Done()
						start.Wait()
						for i := 0; !stop.Load() || i < 200; i++ {
							s.Sweep()
						}
					}()
					go func() { // new versions of the policies
						defer churning.Done()
						start.Wait()
						for i := 0; !stop.Load() || i < 200; i++ {
							name := []string{keyrate.DefaultPolicy, "a", "b"}[i%3]
							if err := s.SetPolicy(keyrate.Policy{Name: name, Limits: []keyrate.Limit{limit}}); err != nil {
								t.Error(err)
								return
							}
							side.Store(i%2 == 0)
						}
					}()
					start.Done()
					spending.Wait()
					stop.Store(true)
					churning.Wait()
					if got := admitted.Load(); got != burst {
						t.Fatalf("the hot key admitted %d on a frozen clock, want its burst %d", got, burst)
					}
					if held := striped.KeysHeld(s); s.Len() != held || s.Stats().Keys != held {
						t.Fatalf("Len() = %d, Stats().Keys = %d, but the tables hold %d keys", s.Len(), s.Stats().Keys, held)
					}
					if d, _ := s.AllowN("hot-key-0123", 1); d.Allowed || d.Remaining != 0 {
						t.Fatalf("after its burst the hot key got %+v", d)
					}
				})
			}
		}
	}
}

// TestReserveCancelUnderChurn reserves from one hot key on every core at
// once, with a maximum wait of 10 hours on a frozen clock, cancelling
// every other reservation it got (and trying each cancellation twice),
// while other goroutines insert keys that are refunded full (growth,
// sampling, shrinking), sweep, and replace the policy by an equal one.
// The hot key can promise at most its burst plus what 10 hours refill
// (rules' wait arithmetic): the reservations granted less those
// cancelled must be exactly that, a second cancellation of one
// reservation must never give anything back, and the key must then be
// empty. Bounded by iteration counts.
func TestReserveCancelUnderChurn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const burst, wait = 20, 10 * time.Hour
	limit := keyrate.Limit{Rate: 3, Per: time.Hour, Burst: burst} // 30 more in 10 hours
	const promised = burst + 30
	s, err := striped.New(limit, keyrate.WithClock(clock.NewManual(time.Hour)), striped.WithStripes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var granted, cancelled atomic.Int64
	var start, spending, churning sync.WaitGroup
	start.Add(1)
	for range 4 {
		spending.Add(1)
		go func() {
			defer spending.Done()
			start.Wait()
			for j := range 2000 {
				r, err := s.Reserve("hot-key-0123", 1, wait)
				if err != nil || !r.OK() {
					continue
				}
				granted.Add(1)
				if j%2 == 0 && r.Cancel() {
					cancelled.Add(1)
					if r.Cancel() {
						t.Errorf("a reservation was cancelled twice")
					}
				}
			}
		}()
	}
	var stop atomic.Bool
	churning.Add(2)
	go func() {
		defer churning.Done()
		start.Wait()
		for i := 0; !stop.Load() || i < 2000; i++ {
			k := fmt.Sprintf("churn-%d", i)
			s.Allow(k)
			s.Refund(k, 1)
			if i%64 == 0 {
				s.Sweep()
			}
		}
	}()
	go func() {
		defer churning.Done()
		start.Wait()
		for i := 0; !stop.Load() || i < 100; i++ {
			if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	start.Done()
	spending.Wait()
	stop.Store(true)
	churning.Wait()
	if net := granted.Load() - cancelled.Load(); net != promised {
		t.Fatalf("%d reservations granted, %d cancelled: %d promised, want exactly %d", granted.Load(), cancelled.Load(), net, promised)
	}
	if r, err := s.Reserve("hot-key-0123", 1, wait); err != nil || r.OK() {
		t.Fatalf("a reservation after the key promised all it can: %v, ok %v", err, r.OK())
	}
}
