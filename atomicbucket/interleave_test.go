package atomicbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/conformance"
)

// diffHooked returns a store on a hook clock (rebuild_test.go's) with
// tiers "one" (the default's bucket), "multi" (that bucket and a second
// window) and "win" (a sliding window), frozen at one reading.
func diffHooked(t *testing.T, opts ...keyrate.Option) (*atomicbucket.Store, *conformance.HookClock, map[string]keyrate.Tier) {
	t.Helper()
	bucket := keyrate.Limit{Rate: 10, Per: time.Hour, Burst: 10}
	clk := conformance.NewHookClock(time.Hour)
	s, err := atomicbucket.New(bucket, append([]keyrate.Option{keyrate.WithClock(clk), keyrate.WithPolicies(
		keyrate.Policy{Name: "one", Limits: []keyrate.Limit{bucket}},
		keyrate.Policy{Name: "multi", Limits: []keyrate.Limit{bucket, {Rate: 100, Per: time.Hour, Burst: 100}}},
		keyrate.Policy{Name: "win", Limits: []keyrate.Limit{keyrate.Limit{Rate: 10, Per: time.Hour}.Using(keyrate.SlidingWindow)}},
	)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tiers := map[string]keyrate.Tier{}
	for _, n := range []string{"one", "multi", "win"} {
		if tiers[n], err = s.Tier(n); err != nil {
			t.Fatal(err)
		}
	}
	return s, clk, tiers
}

// arm runs f at the next reading of clk, and returns a check that it ran.
func arm(t *testing.T, clk *conformance.HookClock, f func()) func(what string) {
	fired := false
	g := func() { fired = true; f() }
	clk.AtNextReading(g)
	return func(what string) {
		t.Helper()
		if !fired {
			t.Fatalf("%s: the hook did not run inside the call", what)
		}
	}
}

// diffKeyNames are keys of the length classes the table probes apart.
var diffKeyNames = map[string]string{"len0": "", "len7": "abcdefg", "len8": "abcdefgh", "len16": "abcdefghabcdefgh", "len17": "abcdefghabcdefgh1", "len1000": string(make([]byte, 1000))}

// TestMultiWindowAcrossRebuild is TestSpendAcrossRebuild for a key
// of several windows (the slow path: the slot's word is its lock), and
// for every key length: each of ten spends runs across a rebuild of its
// segment between finding the slot and locking it; the eleventh is
// denied.
func TestMultiWindowAcrossRebuild(t *testing.T) {
	for name, key := range diffKeyNames {
		for _, hashed := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				var opts []keyrate.Option
				if hashed {
					opts = append(opts, keyrate.WithHashedKeys())
				}
				s, clk, tiers := diffHooked(t, opts...)
				for _, tier := range []string{"multi", "one", "win"} {
					key := key + tier
					if d, err := s.AllowTier(key, tiers[tier], 1); err != nil || !d.Allowed {
						t.Fatalf("first AllowTier(%s) = %+v, %v", tier, d, err)
					}
					for i := 2; i <= 11; i++ {
						ran := arm(t, clk, func() { atomicbucket.RebuildSegmentOf(s, key) })
						d, err := s.AllowTier(key, tiers[tier], 1)
						ran("AllowTier")
						if want := i <= 10; err != nil || d.Allowed != want || d.Remaining != max(10-i, 0) {
							t.Fatalf("%s: spend %d across a rebuild = %+v, %v; want allowed %v with %d left", tier, i, d, err, want, max(10-i, 0))
						}
					}
				}
			})
		}
	}
}

// TestRefundPeekReserveAcrossRebuild: Refund, Peek and Reserve
// each run across a rebuild of the key's segment (between finding the
// slot and using it) and act on the key's bucket exactly once.
func TestRefundPeekReserveAcrossRebuild(t *testing.T) {
	for _, tier := range []string{"one", "multi"} {
		t.Run(tier, func(t *testing.T) {
			s, clk, tiers := diffHooked(t)
			key := "refund-key-01"
			rebuild := func() { atomicbucket.RebuildSegmentOf(s, key) }
			for range 6 {
				if d, err := s.AllowTier(key, tiers[tier], 1); err != nil || !d.Allowed {
					t.Fatalf("AllowTier = %+v, %v", d, err)
				}
			}
			ran := arm(t, clk, rebuild)
			if err := s.RefundTier(key, tiers[tier], 2); err != nil {
				t.Fatal(err)
			}
			ran("RefundTier")
			// 4 + 2 = 6 left; a Peek across a rebuild says so.
			ran = arm(t, clk, rebuild)
			p, err := s.ReserveTier(key, tiers[tier], 6, 0)
			ran("ReserveTier")
			if err != nil || !p.OK() || p.Delay() != 0 {
				t.Fatalf("ReserveTier(6) after a refund of 2 across a rebuild = ok %v delay %v, %v; want the 6 left at once", p.OK(), p.Delay(), err)
			}
			if d, err := s.AllowTier(key, tiers[tier], 1); err != nil || d.Allowed {
				t.Fatalf("AllowTier after spending everything = %+v, %v; want denied", d, err)
			}
		})
	}
	t.Run("peek", func(t *testing.T) {
		s, clk, _ := diffHooked(t)
		key := "peek-key-000001"
		for range 3 {
			s.Allow(key)
		}
		ran := arm(t, clk, func() { atomicbucket.RebuildSegmentOf(s, key) })
		d := s.Peek(key)
		ran("Peek")
		if !d.Allowed || d.Remaining != 7 {
			t.Fatalf("Peek across a rebuild = %+v, want allowed with 7 left", d)
		}
	})
}

// TestCancelAcrossRebuild: a Cancel whose compare-and-swap loses to
// a rebuild of the key's segment (between its load and its swap: it reads
// the clock there) looks the key up again and gives the tokens back, as a
// store that never rebuilds would: the bucket did not change.
func TestCancelAcrossRebuild(t *testing.T) {
	s, clk, _ := diffHooked(t)
	key := "cancel-key-0001"
	for range 10 {
		s.Allow(key)
	}
	r, err := s.Reserve(key, 1, time.Hour)
	if err != nil || !r.OK() || r.Delay() == 0 {
		t.Fatalf("Reserve on an empty bucket = ok %v delay %v, %v; want a slot ahead", r.OK(), r.Delay(), err)
	}
	ran := arm(t, clk, func() { atomicbucket.RebuildSegmentOf(s, key) })
	if !r.Cancel() {
		t.Fatal("Cancel across a rebuild gave nothing back")
	}
	ran("Cancel")
	r2, err := s.Reserve(key, 1, time.Hour)
	if err != nil || r2.At() != r.At() {
		t.Fatalf("a reservation after the Cancel got slot %v, %v; want the cancelled one's %v", r2.At(), err, r.At())
	}
}

// TestTierFlipBetweenLookupAndSwap: between a spend's lookup of its
// slot and its compare-and-swap, another call moves the key to another
// tier (retiring the slot and carrying its state into a new one); the
// spend's swap fails on the dead slot, and it carries the key back and
// spends there. On a frozen clock the key admits exactly its burst over
// any sequence of such flips, between one- and two-window tiers whose
// window 0 is the same bucket.
func TestTierFlipBetweenLookupAndSwap(t *testing.T) {
	for _, pair := range [][2]string{{"one", "multi"}, {"multi", "one"}, {"one", "one"}} {
		t.Run(pair[0]+"-"+pair[1], func(t *testing.T) {
			s, clk, tiers := diffHooked(t)
			key := "flip-key-000001"
			admitted := 0
			for i := range 20 {
				a, b := tiers[pair[i%2]], tiers[pair[(i+1)%2]]
				ran := func(string) {}
				if i > 0 {
					ran = arm(t, clk, func() {
						if d, err := s.AllowTier(key, b, 1); err == nil && d.Allowed {
							admitted++
						}
					})
				}
				if d, err := s.AllowTier(key, a, 1); err == nil && d.Allowed {
					admitted++
				}
				ran("AllowTier")
			}
			if admitted != 10 {
				t.Fatalf("admitted %d across tier flips on a frozen clock, want exactly the burst 10", admitted)
			}
			if n := s.Len(); n != 1 {
				t.Fatalf("Len() = %d after flips of one key, want 1", n)
			}
		})
	}
}
