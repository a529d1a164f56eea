package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// windowStore builds store st under limit on a manual clock reading 0.
func windowStore(t *testing.T, st int, limit keyrate.Limit, opts ...keyrate.Option) (keyrate.WaitLimiter, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(0)
	l, err := stores[st].new(limit, append([]keyrate.Option{keyrate.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatalf("New(%v): %v", limit, err)
	}
	return l.(keyrate.WaitLimiter), clk
}

// A1: a policy change that adds a window-algorithm limit. Rules.Carry
// starts the added window at State(now), a token bucket's full state,
// which under a window rule's packing is a window far in the future: the
// key is then denied for decades, where a new key (or the same key after
// an eviction) is allowed.
func TestWindowCarryAddedWindowStartsFull(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, keyrate.PerSecond(10))
			clk.Set(5 * time.Second)
			l.Allow("old") // decided under the one-bucket policy
			two := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{
				keyrate.PerSecond(10),
				keyrate.PerMinute(100).Using(keyrate.FixedWindow),
			}}
			if err := l.SetPolicy(two); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			fresh, _ := l.AllowN("new", 1)
			old, _ := l.AllowN("old", 1)
			if !fresh.Allowed || !old.Allowed {
				t.Fatalf("after adding a fixed window: new key %+v\nold key %+v\nwant both allowed (a window the old policy lacked starts full)", fresh, old)
			}
		})
	}
}

// A3: a reservation counted in the next window is lost when the key's
// state is carried over to a new version of the same policy before its
// slot: Carry counts the debt (capped at N) in now's window. At the slot,
// the next window admits N more beside the reservation's N.
func TestWindowCarryLosesReservedWindow(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for i, st := range stores {
			t.Run(alg.String()+"/"+st.name, func(t *testing.T) {
				limit := keyrate.Limit{Rate: 10, Per: time.Second}.Using(alg)
				l, clk := windowStore(t, i, limit)
				m := conformance.NewWindowModel(limit)
				clk.Set(100 * time.Millisecond)
				if d, _ := l.AllowN("k", 10); !d.Allowed {
					t.Fatal("first 10 denied")
				}
				m.Take(int64(100*time.Millisecond), 10)
				r, err := l.Reserve("k", 10, 3*time.Second)
				if err != nil || !r.OK() {
					t.Fatalf("Reserve = %+v, %v", r, err)
				}
				slot := clk.Now() + r.Delay()
				m.Reserve(int64(100*time.Millisecond), 10, int64(3*time.Second))
				// the same limit, recompiled: a new version of the policy
				if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit}}); err != nil {
					t.Fatal(err)
				}
				l.AllowN("k", 1) // denied; carries the key over now
				clk.Set(slot)
				admitted := 0
				for range 20 {
					if d, _ := l.AllowN("k", 1); d.Allowed {
						admitted++
					}
				}
				want := 0
				for range 20 {
					if m.Take(int64(slot), 1) {
						want++
					}
				}
				if admitted != want {
					t.Fatalf("at the reservation's slot %v (window %d) the store admitted %d more beside the reserved 10; the limit is %d per window, the model admits %d",
						slot, slot/limit.Per, admitted, limit.Rate, want)
				}
			})
		}
	}
}

// A3b: the same from a token bucket with a reservation pending to a fixed
// window of the same rate: the token bucket's debt beyond N (the
// reservation) is capped at N in now's window, and dropped.
func TestWindowCarryBucketReservationToWindow(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, keyrate.PerSecond(10))
			if d, _ := l.AllowN("k", 10); !d.Allowed {
				t.Fatal("burst denied")
			}
			r, err := l.Reserve("k", 10, 2*time.Second)
			if err != nil || !r.OK() || r.Delay() != time.Second {
				t.Fatalf("Reserve = %+v, %v", r, err)
			}
			win := keyrate.Limit{Rate: 10, Per: time.Second}.Using(keyrate.FixedWindow)
			if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{win}}); err != nil {
				t.Fatal(err)
			}
			l.AllowN("k", 1) // denied: carried over at t=0
			clk.Set(time.Second)
			admitted := 0
			for range 20 {
				if d, _ := l.AllowN("k", 1); d.Allowed {
					admitted++
				}
			}
			// [0, 1s]: 10 + 10 reserved + admitted. The old bound over 1s is
			// Burst + Rate = 20; the new one is 10 in window [1s, 2s), which
			// already holds the reservation's 10.
			if admitted != 0 {
				t.Fatalf("window [1s,2s) admitted %d beside the 10 reserved under the token bucket: %d in [0,1s], over both limits", admitted, 20+admitted)
			}
		})
	}
}

// A4: carrying a sliding window's state folds the previous window's
// weighted count into the current count at the carry's reading, so a
// stale (earlier) reading after the carry is charged the weight at the
// later reading: a policy change followed by a stale reading (or a clock
// stepped back) admits what the sliding rule forbids at that reading.
func TestWindowSlidingCarryStaleReading(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			limit := keyrate.Limit{Rate: 10, Per: 10 * time.Second}.Using(keyrate.SlidingWindow)
			l, clk := windowStore(t, i, limit)
			m := conformance.NewWindowModel(limit)
			clk.Set(time.Second)
			l.AllowN("k", 10)
			m.Take(int64(time.Second), 10)
			clk.Set(19 * time.Second) // window 1, e = 9s: the previous 10 weigh 1
			if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit}}); err != nil {
				t.Fatal(err)
			}
			if d, _ := l.AllowN("k", 10); d.Allowed { // denied, carries the key over
				t.Fatal("cost 10 allowed at 19s")
			}
			clk.Set(10 * time.Second) // a stale reading: window 1, e = 0
			d, _ := l.AllowN("k", 9)
			if want := m.Allows(int64(10*time.Second), 9); d.Allowed != want {
				t.Fatalf("AllowN(9) at t=10s after the carry at 19s: %+v; the sliding rule (p=10, e=0) allows: %v", d, want)
			}
		})
	}
}

// Control for A3/A3b: the token bucket carried to a new version of itself
// keeps the pending reservation (its debt is carried whole).
func TestWindowControlBucketCarryKeepsReservation(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, keyrate.PerSecond(10))
			l.AllowN("k", 10)
			r, _ := l.Reserve("k", 10, 2*time.Second)
			if !r.OK() {
				t.Fatal("reserve")
			}
			l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(10)}})
			l.AllowN("k", 1)
			clk.Set(time.Second)
			if d, _ := l.AllowN("k", 1); d.Allowed {
				t.Fatalf("token bucket lost its reservation across a carry: %+v", d)
			}
		})
	}
}

// A6: a Refund that gives nothing back (the key's counts have all
// expired) still repacks the state into now's window, so a reading from
// an earlier window (a request that read the clock before the refund, or
// a clock stepped back) is denied where the unchanged key allows it.
func TestWindowNoopRefundMovesWindow(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for i, st := range stores {
			t.Run(alg.String()+"/"+st.name, func(t *testing.T) {
				limit := keyrate.Limit{Rate: 10, Per: time.Second}.Using(alg)
				l, clk := windowStore(t, i, limit)
				m := conformance.NewWindowModel(limit)
				clk.Set(500 * time.Millisecond)
				l.Allow("k")
				m.Take(int64(500*time.Millisecond), 1)
				clk.Set(5 * time.Second) // every count long expired
				l.Refund("k", 1)         // gives nothing back
				m.Refund(int64(5*time.Second), 1)
				clk.Set(900 * time.Millisecond) // stale reading
				d, _ := l.AllowN("k", 1)
				if want := m.Allows(int64(900*time.Millisecond), 1); d.Allowed != want {
					t.Fatalf("AllowN at 0.9s after a no-op Refund at 5s: %+v; the model (and the same store without the Refund) allows: %v", d, want)
				}
			})
		}
	}
}

// A3c: a carry made at a reading from an earlier window than the key's
// state (a stale reading: the request read the clock just before another
// spent in the next window; here a clock stepped back) counts the debt in
// the stale reading's window, which the key then leaves: the state's
// window is lost, and it admits N more.
func TestWindowCarryAtStaleReading(t *testing.T) {
	for _, alg := range []keyrate.Algorithm{keyrate.FixedWindow, keyrate.SlidingWindow} {
		for i, st := range stores {
			t.Run(alg.String()+"/"+st.name, func(t *testing.T) {
				limit := keyrate.Limit{Rate: 10, Per: time.Second}.Using(alg)
				l, clk := windowStore(t, i, limit)
				clk.Set(1500 * time.Millisecond)
				if d, _ := l.AllowN("k", 10); !d.Allowed { // window 1 full
					t.Fatal("burst denied")
				}
				if err := l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit}}); err != nil {
					t.Fatal(err)
				}
				clk.Set(900 * time.Millisecond) // a stale reading, window 0
				if d, _ := l.AllowN("k", 1); d.Allowed {
					t.Fatal("stale reading allowed")
				}
				clk.Set(1600 * time.Millisecond) // window 1 again
				admitted := 0
				for range 10 {
					if d, _ := l.AllowN("k", 1); d.Allowed {
						admitted++
					}
				}
				if admitted > 0 {
					t.Fatalf("window [1s,2s) admitted %d beside the 10 it already held (N=10)", admitted)
				}
			})
		}
	}
}

// Control for A3c: the token bucket carried at a stale reading keeps its
// debt (TAT' = t + (TAT − t) at equal rates).
func TestWindowControlBucketCarryAtStaleReading(t *testing.T) {
	for i, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			l, clk := windowStore(t, i, keyrate.PerSecond(10))
			clk.Set(1500 * time.Millisecond)
			l.AllowN("k", 10)
			l.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(10)}})
			clk.Set(900 * time.Millisecond)
			l.AllowN("k", 1)
			clk.Set(1600 * time.Millisecond)
			if d, _ := l.AllowN("k", 2); d.Allowed {
				t.Fatalf("token bucket admitted 2 at 1.6s after 10 at 1.5s: %+v", d)
			}
		})
	}
}
