package conformance_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// retryPolicies are policies of every shape whose denials
// TestRetryAfterIsEnough checks: one token bucket, two, a token bucket
// beside a fixed window and beside a sliding window, and the window
// algorithms alone.
var retryPolicies = []keyrate.Policy{
	{Name: "one", Limits: []keyrate.Limit{{Rate: 3, Per: time.Second, Burst: 4}}},
	{Name: "two", Limits: []keyrate.Limit{{Rate: 2, Per: 100 * time.Millisecond, Burst: 3}, {Rate: 7, Per: time.Second, Burst: 9}}},
	{Name: "fixed-mix", Limits: []keyrate.Limit{{Rate: 5, Per: 300 * time.Millisecond, Burst: 3}, keyrate.Limit{Rate: 6, Per: time.Second}.Using(keyrate.FixedWindow)}},
	{Name: "sliding-mix", Limits: []keyrate.Limit{{Rate: 5, Per: 300 * time.Millisecond, Burst: 3}, keyrate.Limit{Rate: 6, Per: time.Second}.Using(keyrate.SlidingWindow)}},
	{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: 700 * time.Millisecond}.Using(keyrate.FixedWindow)}},
	{Name: "sliding", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: 700 * time.Millisecond}.Using(keyrate.SlidingWindow)}},
}

// TestRetryAfterIsEnough checks the promise of Decision.RetryAfter and of
// a refused Reservation's Delay on every store and every shape of policy:
// a denied request made again RetryAfter later (nothing else spending
// meanwhile) is allowed, and one made a nanosecond sooner than that is
// not, except where the slot was rounded up to the nanosecond; a
// reservation refused for needing Delay is granted with Delay as its
// maximum wait, at Delay.
func TestRetryAfterIsEnough(t *testing.T) {
	for _, st := range stores {
		for _, p := range retryPolicies {
			t.Run(st.name+"/"+p.Name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(len(p.Name))))
				clk := clock.NewManual(time.Hour)
				l, err := st.new(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(p))
				if err != nil {
					t.Fatal(err)
				}
				ps := l.(keyrate.WaitLimiter)
				tier, _ := ps.Tier(p.Name)
				minBurst := p.Limits[0].Burst
				for _, lim := range p.Limits {
					minBurst = min(minBurst, lim.Burst)
				}
				denials := 0
				for i := range 3000 {
					clk.Advance(time.Duration(rng.IntN(60)) * time.Millisecond)
					cost := 1 + rng.IntN(minBurst)
					d, err := ps.AllowTier("k", tier, cost)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						if d.RetryAfter != 0 {
							t.Fatalf("step %d: allowed with RetryAfter %v", i, d.RetryAfter)
						}
						continue
					}
					denials++
					if d.RetryAfter <= 0 {
						t.Fatalf("step %d: AllowTier(%d) denied with RetryAfter %v", i, cost, d.RetryAfter)
					}
					// A reservation with a maximum wait of RetryAfter is
					// granted, for that slot; the refused one needs it.
					r, err := ps.ReserveTier("k", tier, cost, d.RetryAfter-1)
					if err != nil {
						t.Fatal(err)
					}
					if r.OK() {
						t.Fatalf("step %d: denied with RetryAfter %v, but Reserve(%d, %v) = OK, delay %v", i, d.RetryAfter, cost, d.RetryAfter-1, r.Delay())
					}
					if r.Delay() != d.RetryAfter {
						t.Fatalf("step %d: RetryAfter %v but a refused Reserve(%d) needs %v", i, d.RetryAfter, cost, r.Delay())
					}
					switch rng.IntN(3) {
					case 0: // reserve it, and cancel it at once
						r, err := ps.ReserveTier("k", tier, cost, d.RetryAfter)
						if err != nil || !r.OK() || r.Delay() != d.RetryAfter {
							t.Fatalf("step %d: Reserve(%d, %v) after a denial with RetryAfter %v = OK %v delay %v, %v", i, cost, d.RetryAfter, d.RetryAfter, r.OK(), r.Delay(), err)
						}
						if !r.Cancel() {
							t.Fatalf("step %d: the reservation just made could not be cancelled", i)
						}
					case 1: // a nanosecond early: denied
						clk.Advance(d.RetryAfter - 1)
						if e, _ := ps.AllowTier("k", tier, cost); e.Allowed {
							t.Fatalf("step %d: denied with RetryAfter %v, but allowed %v later", i, d.RetryAfter, d.RetryAfter-1)
						}
						clk.Advance(1)
						if e, _ := ps.AllowTier("k", tier, cost); !e.Allowed {
							t.Fatalf("step %d: denied with RetryAfter %v, and denied again then: %+v", i, d.RetryAfter, e)
						}
					default:
						clk.Advance(d.RetryAfter)
						if e, _ := ps.AllowTier("k", tier, cost); !e.Allowed {
							t.Fatalf("step %d: AllowTier(%d) denied with RetryAfter %v (%+v), and denied again then: %+v", i, cost, d.RetryAfter, d, e)
						}
					}
				}
				if denials < 100 {
					t.Fatalf("only %d denials in 3000 requests: the test exercises too little", denials)
				}
			})
		}
	}
}

// TestRefundIsExact checks Refund's promise on every store and every
// shape of policy: a spend refunded at once, at the same reading, leaves
// the key as if it had not been made. Two stores on one clock see the
// same requests (spends, reservations, cancels, the clock moving); one of
// them also spends and at once refunds now and then, and they must decide
// every shared request alike.
func TestRefundIsExact(t *testing.T) {
	for _, st := range stores {
		for _, p := range retryPolicies {
			t.Run(st.name+"/"+p.Name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(11, uint64(len(p.Name))))
				clk := clock.NewManual(time.Hour)
				open := func() (keyrate.WaitLimiter, keyrate.Tier) {
					l, err := st.new(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(p))
					if err != nil {
						t.Fatal(err)
					}
					w := l.(keyrate.WaitLimiter)
					tier, _ := w.Tier(p.Name)
					return w, tier
				}
				a, ta := open()
				b, tb := open()
				minBurst := p.Limits[0].Burst
				for _, lim := range p.Limits {
					minBurst = min(minBurst, lim.Burst)
				}
				var ra, rb keyrate.Reservation
				refunded := 0
				for i := range 3000 {
					clk.Advance(time.Duration(rng.IntN(150)) * time.Millisecond)
					cost := 1 + rng.IntN(minBurst)
					switch op := rng.IntN(10); {
					case op < 5:
						da, _ := a.AllowTier("k", ta, cost)
						db, _ := b.AllowTier("k", tb, cost)
						if da != db {
							t.Fatalf("step %d: AllowTier(%d) = %+v on the store that refunded, %+v on the other", i, cost, da, db)
						}
					case op < 7:
						wait := time.Duration(rng.IntN(500)) * time.Millisecond
						ra, _ = a.ReserveTier("k", ta, cost, wait)
						rb, _ = b.ReserveTier("k", tb, cost, wait)
						if ra.OK() != rb.OK() || ra.At() != rb.At() {
							t.Fatalf("step %d: ReserveTier(%d, %v) = OK %v at %v on the store that refunded, OK %v at %v on the other", i, cost, wait, ra.OK(), ra.At(), rb.OK(), rb.At())
						}
					case op < 8:
						if ca, cb := ra.Cancel(), rb.Cancel(); ca != cb {
							t.Fatalf("step %d: Cancel = %v on the store that refunded, %v on the other", i, ca, cb)
						}
					default:
						if d, _ := a.AllowTier("k", ta, cost); d.Allowed {
							if err := a.RefundTier("k", ta, cost); err != nil {
								t.Fatal(err)
							}
							refunded++
						}
					}
				}
				if refunded < 50 {
					t.Fatalf("only %d spends refunded: the test exercises too little", refunded)
				}
			})
		}
	}
}
