package atomicbucket_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
)

// diffStore is what the differential tests drive: both stores
// implement it.
type diffStore interface {
	keyrate.PolicyLimiter
	keyrate.WaitLimiter
	keyrate.BoundedLimiter
}

// diffKeys returns n keys of every length class casmap treats apart:
// empty, under 8 bytes (hashed with maphash, probed by probeLong), 8 to
// 16 (Lookup's inline hash and two-word compare), 17 and over, 1000 bytes,
// and one of 1 MiB (a record in a chunk of its own), with keys that share
// their first or last 8 bytes (which the two-word compare reads).
func diffKeys(n int) []string {
	keys := []string{"", "a", "abcdefg", "abcdefgh", "abcdefgh0", "abcdefghabcdefgh", "Xbcdefghabcdefgh",
		"abcdefghabcdefgX", "abcdefghabcdefgh1", strings.Repeat("k", 1000), strings.Repeat("m", 1<<20)}
	for i := 0; len(keys) < n; i++ {
		switch i % 5 {
		case 0:
			keys = append(keys, fmt.Sprintf("%d", i)) // short
		case 1:
			keys = append(keys, fmt.Sprintf("key-%012d", i)) // 16 bytes
		case 2:
			keys = append(keys, fmt.Sprintf("k%07d", i)) // 8 bytes
		case 3:
			keys = append(keys, fmt.Sprintf("a-long-key-%020d", i)) // 31 bytes
		case 4:
			keys = append(keys, fmt.Sprintf("same-prefix%d", i)) // 12 to 15 bytes
		}
	}
	return keys
}

// diffPolicies are the tiers of the differential tests: token buckets
// of one and of several windows, a window algorithm, and an unlimited one.
func diffPolicies() []keyrate.Policy {
	return []keyrate.Policy{
		{Name: "one", Limits: []keyrate.Limit{{Rate: 3, Per: time.Second, Burst: 5}}},
		{Name: "two", Limits: []keyrate.Limit{{Rate: 3, Per: time.Second, Burst: 5}, {Rate: 20, Per: time.Minute, Burst: 20}}},
		{Name: "win", Limits: []keyrate.Limit{keyrate.Limit{Rate: 4, Per: time.Second}.Using(keyrate.SlidingWindow)}},
		{Name: "three", Limits: []keyrate.Limit{{Rate: 2, Per: time.Second, Burst: 4}, {Rate: 10, Per: time.Minute, Burst: 10},
			keyrate.Limit{Rate: 5, Per: 10 * time.Second}.Using(keyrate.FixedWindow)}},
		keyrate.Unlimited("free"),
	}
}

// diffVariants are the option sets the differential test runs under.
var diffVariants = []struct {
	name string
	opts []keyrate.Option
	// hashed stores decide two keys that collide as one; with 64-bit
	// hashes over a few hundred keys none do.
	hashed bool
}{
	{name: "plain"},
	{name: "grace0", opts: []keyrate.Option{keyrate.WithEvictionGrace(0)}},
	{name: "hashed", opts: []keyrate.Option{keyrate.WithHashedKeys(), keyrate.WithEvictionGrace(0)}, hashed: true},
}

// TestAgreesWithMutex drives atomicbucket and mutexbucket through
// the same random sequence of every call the stores have (AllowN,
// AllowTier, Allow, Peek, Refund, RefundTier, Reserve and its Cancel,
// SetPolicy, Sweep) on a clock that only moves forwards, over keys of
// every length class and enough of them that atomicbucket's small
// segment tables are rebuilt again and again (grown, shrunk after sweeps,
// emptied), and a policy function that moves keys between policies. Every
// answer must be the same, and Len must agree after every Sweep (both then
// hold exactly the keys not full).
func TestAgreesWithMutex(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	keys := diffKeys(300)
	for _, v := range diffVariants {
		for seed := range seeds {
			t.Run(fmt.Sprintf("opts=%s/seed=%d", v.name, seed), func(t *testing.T) {
				diffDifferential(t, uint64(seed), keys, v.opts, 4000)
			})
		}
	}
}

func diffDifferential(t *testing.T, seed uint64, keys []string, opts []keyrate.Option, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x7e57))
	clk := clock.NewManual(time.Hour)
	var shift atomic.Int64 // the policy function's mapping changes with it
	names := []string{"", "one", "two", "win", "three", "free"}
	polFunc := func(key string) string {
		return names[(len(key)+int(shift.Load()))%len(names)]
	}
	base := append([]keyrate.Option{keyrate.WithClock(clk), keyrate.WithPolicies(diffPolicies()...), keyrate.WithPolicyFunc(polFunc)}, opts...)
	limit := keyrate.Limit{Rate: 2, Per: time.Second, Burst: 3}
	a, err := atomicbucket.New(limit, base...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m, err := mutexbucket.New(limit, base...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	stores := []diffStore{m, a}
	tiers := make([][]keyrate.Tier, 2)
	for i, s := range stores {
		for _, p := range diffPolicies() {
			tr, err := s.Tier(p.Name)
			if err != nil {
				t.Fatal(err)
			}
			tiers[i] = append(tiers[i], tr)
		}
	}
	type pending struct{ r [2]keyrate.Reservation }
	var reservations []pending
	// Keys are drawn mostly from a window that drifts over the pool, so
	// that keys go idle, are swept, and come back.
	for step := range steps {
		lo := (step / 8) % len(keys)
		key := keys[(lo+rng.IntN(40))%len(keys)]
		if rng.IntN(50) == 0 {
			key = keys[rng.IntN(len(keys))]
		}
		cost := 1 + rng.IntN(3)
		ti := rng.IntN(len(tiers[0]))
		op := rng.IntN(100)
		wait := time.Duration(rng.IntN(3)) * 400 * time.Millisecond
		back := rng.IntN(3)
		desc := ""
		var got [2]string
		for i, s := range stores {
			var res string
			switch {
			case op < 30:
				desc = fmt.Sprintf("AllowN(%.20q, %d)", key, cost)
				d, err := s.AllowN(key, cost)
				res = fmt.Sprintf("%+v %v", d, err)
			case op < 45:
				desc = fmt.Sprintf("AllowTier(%.20q, %s, %d)", key, tiers[i][ti].Name(), cost)
				d, err := s.AllowTier(key, tiers[i][ti], cost)
				res = fmt.Sprintf("%+v %v", d, err)
			case op < 55:
				desc = fmt.Sprintf("Allow(%.20q)", key)
				res = fmt.Sprint(s.Allow(key))
			case op < 62:
				desc = fmt.Sprintf("Peek(%.20q)", key)
				res = fmt.Sprintf("%+v", s.Peek(key))
			case op < 67:
				desc = fmt.Sprintf("Refund(%.20q, %d)", key, cost)
				res = fmt.Sprint(s.Refund(key, cost))
			case op < 70:
				desc = fmt.Sprintf("RefundTier(%.20q, %s, %d)", key, tiers[i][ti].Name(), cost)
				res = fmt.Sprint(s.RefundTier(key, tiers[i][ti], cost))
			case op < 78:
				desc = fmt.Sprintf("Reserve(%.20q, %d, %v)", key, cost, wait)
				r, err := s.Reserve(key, cost, wait)
				res = fmt.Sprintf("ok=%v at=%v delay=%v %v", r.OK(), r.At(), r.Delay(), err)
				if i == 0 {
					reservations = append(reservations, pending{})
				}
				reservations[len(reservations)-1].r[i] = r
			case op < 84:
				if len(reservations) == 0 {
					continue
				}
				j := len(reservations) - 1 - back%min(len(reservations), 3)
				desc = fmt.Sprintf("Cancel(reservation %d of %.20q)", j, reservations[j].r[i].Key())
				res = fmt.Sprint(s.Cancel(reservations[j].r[i]))
			case op < 86:
				desc = "Sweep()"
				s.Sweep()
				res = fmt.Sprintf("Len=%d", s.Len())
			case op < 87:
				// Change a tier's limits: keys under it carry over at their
				// next request.
				p := diffPolicies()[ti]
				if !p.Unlimited {
					p.Limits = append([]keyrate.Limit(nil), p.Limits...)
					p.Limits[0].Rate += int(seed+uint64(step))%3 + 1
				}
				desc = fmt.Sprintf("SetPolicy(%v)", p)
				res = fmt.Sprint(s.SetPolicy(p))
			case op < 88:
				desc = "shift the policy function"
				if i == 0 {
					shift.Add(1)
				}
			default:
				desc = "advance"
			}
			got[i] = res
		}
		if got[0] != got[1] {
			t.Fatalf("seed %d step %d at %v: %s:\n mutexbucket  %s\n atomicbucket %s", seed, step, clk.Now(), desc, got[0], got[1])
		}
		if op >= 88 || rng.IntN(4) == 0 {
			clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
	}
	// A final sweep far ahead empties both.
	clk.Advance(time.Hour)
	a.Sweep()
	m.Sweep()
	if a.Len() != 0 || m.Len() != 0 {
		t.Fatalf("after a sweep an hour on: Len = %d (atomic), %d (mutex), want 0", a.Len(), m.Len())
	}
	_ = errors.Is
	_ = sync.Mutex{}
}

// TestStressFrozen: on a frozen clock, goroutines spend from a few
// hot keys of every length class through every entry point (Allow, AllowN
// under a policy function that keeps moving keys between policies,
// AllowTier under one- and two-window tiers whose window 0 is the same
// bucket, Reserve, Peek) while another goroutine keeps rebuilding the
// keys' segments, re-setting the policies (so keys carry over into new
// slots and the segments' policy indexes free and reuse entries), sweeping
// with no grace and churning new keys through the same segments (growing
// and shrinking their tables). With no refill, each key admits exactly
// its burst: a spend lost in a move admits more, one made twice fewer.
func TestStressFrozen(t *testing.T) {
	for _, v := range diffVariants {
		t.Run("opts="+v.name, func(t *testing.T) { diffStressFrozen(t, v.opts) })
	}
}

func diffStressFrozen(t *testing.T, opts []keyrate.Option) {
	const burst, g = 40, 4
	iters := 3000
	if testing.Short() {
		iters = 600
	}
	bucket := keyrate.Limit{Rate: 1, Per: time.Hour, Burst: burst}
	pols := func() []keyrate.Policy {
		return []keyrate.Policy{
			{Name: "p1", Limits: []keyrate.Limit{bucket}},
			{Name: "p2", Limits: []keyrate.Limit{bucket, {Rate: 1, Per: time.Hour, Burst: 10 * burst}}},
			{Name: "p3", Limits: []keyrate.Limit{bucket}},
			{Name: "p4", Limits: []keyrate.Limit{bucket, {Rate: 2, Per: time.Hour, Burst: 5 * burst}, {Rate: 3, Per: time.Minute, Burst: 3 * burst}}},
		}
	}
	names := []string{"", "p1", "p2", "p3", "p4"}
	var shift atomic.Int64
	clk := clock.NewManual(time.Hour)
	s, err := atomicbucket.New(bucket, append([]keyrate.Option{keyrate.WithClock(clk), keyrate.WithPolicies(pols()...),
		keyrate.WithPolicyFunc(func(key string) string { return names[(len(key)+int(shift.Load()))%len(names)] })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hot := diffKeys(24)
	hot[10] = strings.Repeat("m", 3000) // not 1 MiB: the stress's churn would copy it on every rebuild
	var tiers []keyrate.Tier
	for _, p := range pols() {
		tr, err := s.Tier(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		tiers = append(tiers, tr)
	}
	admitted := make([]atomic.Int64, len(hot))
	quit := make(chan struct{})
	var maint sync.WaitGroup
	maint.Go(func() {
		churn := 0
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			switch i % 8 {
			case 0:
				atomicbucket.RebuildSegmentOf(s, hot[i/8%len(hot)])
			case 1:
				if err := s.SetPolicy(pols()[i/8%4]); err != nil {
					t.Error(err)
					return
				}
			case 2:
				shift.Add(1)
			case 3:
				s.Sweep()
			default:
				churn++
				s.Allow(fmt.Sprintf("churn-%d", churn%500))
			}
		}
	})
	var spenders sync.WaitGroup
	for w := range g {
		spenders.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range iters {
				k := rng.IntN(len(hot))
				key := hot[k]
				ok := false
				switch rng.IntN(6) {
				case 0:
					ok = s.Allow(key)
				case 1:
					d, err := s.AllowN(key, 1)
					ok = err == nil && d.Allowed
				case 2:
					d, err := s.AllowTier(key, tiers[rng.IntN(len(tiers))], 1)
					ok = err == nil && d.Allowed
				case 3:
					r, err := s.Reserve(key, 1, 0)
					ok = err == nil && r.OK()
				case 4:
					if d := s.Peek(key); d.Remaining > burst {
						t.Errorf("Peek(%.20q).Remaining = %d, above the burst %d", key, d.Remaining, burst)
					}
				case 5:
					r, err := s.ReserveTier(key, tiers[rng.IntN(len(tiers))], 1, 0)
					ok = err == nil && r.OK()
				}
				if ok {
					admitted[k].Add(1)
				}
			}
		})
	}
	spenders.Wait()
	close(quit)
	maint.Wait()
	// Spend each key to empty at the end, so that every key must show
	// exactly its burst whatever the random draws gave it.
	for k, key := range hot {
		for s.Allow(key) {
			admitted[k].Add(1)
			if admitted[k].Load() > 2*burst {
				break
			}
		}
		if got := admitted[k].Load(); got != burst {
			t.Errorf("key %.20q (%d bytes) admitted %d on a frozen clock, want exactly its burst %d", key, len(key), got, burst)
		}
	}
}
