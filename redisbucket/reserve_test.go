package redisbucket_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/redisbucket"
)

// unixStart is a time source's first reading in the wait tests: about
// the Unix time of today, so that the script's TATs (whole µs of it) and
// the ends of reservations (rules.Rule's ticks of it, modulo 2^64) have
// the magnitudes they have under the server's TIME.
const unixStart = 56 * 365 * 24 * time.Hour

// reserveRef is the reference's Reserve: rules.Rules.Reserve on the
// key's states, carried over to rs first.
func (r *refStore) reserve(rs *rules.Rules, key string, cost int, wait time.Duration) (keyrate.Reservation, error) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Reservation{}, err
	}
	now := r.pols.Now()
	if rs.Unlimited() {
		return rs.Reserved(nil, key, nil, now, cost, wait, -1), nil
	}
	s := r.bucket(key, rs, now)
	_, denied := rs.Reserve(s, now, cost, wait)
	r.keys[key] = refBucket{rs, s}
	res := rs.Reserved(nil, key, s, now, cost, wait, denied)
	// The script recognises a reservation by window 0's state alone (an
	// in-process store by every window's: rules.Rules.End).
	return rules.NewReservation(nil, key, rs, s[0], now, res.At(), wait, cost, res.OK()), nil
}

// cancel is the reference's Cancel: rules.Rules.Cancel if the key is
// still under the reservation's policy, that policy has not been replaced
// since (an in-process store also cancels a reservation made under a
// version since replaced, if no request has carried the key over; a
// redisbucket.Store gives nothing back then), and some window still owes
// more than its Burst (rules.Rules.Slot after now). For the latest
// reservation on a key that last condition is the slot's not having come;
// rules.Rules.Cancel lacks it, and gives back tokens a later spend took
// in another window when the key's states went through a policy without
// that window and back (see TestCancelAfterCarry).
func (r *refStore) cancel(t *testing.T, res keyrate.Reservation) bool {
	b, ok := r.keys[res.Key()]
	if !ok || b.rs != rules.ReservationRules(res) || !res.OK() || res.Delay() <= 0 || r.rules(t, rules.ReservationRules(res).Name()) != b.rs {
		return false
	}
	now := r.pols.Now()
	if b.rs.Slot(b.s, now) <= now {
		return false
	}
	if b.s[0] != rules.ReservationEnd(res) {
		return false
	}
	return b.rs.Cancel(b.s, b.rs.End(b.s), now, res.At(), res.Cost())
}

// openWait returns a store on a fresh prefix reading the manual clock clk,
// with the given options.
func openWait(t *testing.T, client redis.UniversalClient, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) *redisbucket.Store {
	t.Helper()
	return mustNew(t, client, limit, append([]keyrate.Option{redisbucket.WithTimeSource(clk),
		redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout)}, opts...)...)
}

func mustReserve(t *testing.T, s *redisbucket.Store, key string, cost int, wait time.Duration) keyrate.Reservation {
	t.Helper()
	r, err := s.Reserve(key, cost, wait)
	if err != nil {
		t.Fatalf("Reserve(%q, %d, %v): %v", key, cost, wait, err)
	}
	return r
}

func wantReservation(t *testing.T, what string, r keyrate.Reservation, ok bool, delay time.Duration) {
	t.Helper()
	if r.OK() != ok || r.Delay() != delay {
		t.Fatalf("%s = OK %v, Delay %v; want OK %v, Delay %v", what, r.OK(), r.Delay(), ok, delay)
	}
}

// TestReserveSteps: reservations on one key, one token a second, burst 2,
// step by step: slots, the wait a denied one needed, cancelling the
// latest (and only the latest), and the slot as a reading of the time
// source.
func TestReserveSteps(t *testing.T) {
	client := newClient(t, server(t).Addr())
	clk := clock.NewManual(unixStart)
	s := openWait(t, client, keyrate.Limit{Rate: 1, Per: time.Second, Burst: 2}, clk)
	wantReservation(t, "first Reserve(1, 0)", mustReserve(t, s, "k", 1, 0), true, 0)
	wantReservation(t, "second Reserve(1, 1h)", mustReserve(t, s, "k", 1, time.Hour), true, 0)
	wantReservation(t, "Reserve(1, 0) on an empty bucket", mustReserve(t, s, "k", 1, 0), false, time.Second)
	wantReservation(t, "Reserve(1, 999ms)", mustReserve(t, s, "k", 1, 999*time.Millisecond), false, time.Second)
	r1 := mustReserve(t, s, "k", 1, time.Second)
	wantReservation(t, "Reserve(1, 1s)", r1, true, time.Second)
	if r1.At() != unixStart+time.Second || r1.Key() != "k" || r1.Cost() != 1 || rules.ReservationRules(r1).Clock() != clock.Clock(clk) {
		t.Fatalf("Reserve(1, 1s): slot at %v, key %q, cost %d, clock %v; want %v, k, 1, the time source",
			r1.At()-unixStart, r1.Key(), r1.Cost(), rules.ReservationRules(r1).Clock(), time.Second)
	}
	wantReservation(t, "Reserve(2, 2s) behind it", mustReserve(t, s, "k", 2, 2*time.Second), false, 3*time.Second)
	if d := s.Peek("k"); d.Allowed || d.Remaining != 0 || d.RetryAfter != 2*time.Second {
		t.Fatalf("Peek with a reservation at 1s = %+v, want denied, retry after 2s", d)
	}
	if err := s.Refund("k", 1); err != nil {
		t.Fatal(err)
	}
	if d := s.Peek("k"); d.RetryAfter != 2*time.Second {
		t.Fatalf("a refund gave back tokens promised to a reservation: Peek = %+v, want retry after 2s", d)
	}
	if !r1.Cancel() {
		t.Fatal("Cancel of the latest reservation before its slot gave nothing back")
	}
	if r1.Cancel() {
		t.Fatal("a second Cancel of the same reservation gave tokens back")
	}
	r2 := mustReserve(t, s, "k", 1, time.Second)
	wantReservation(t, "Reserve(1, 1s) after the cancel", r2, true, time.Second)
	clk.Advance(time.Second)
	if r2.Cancel() {
		t.Fatal("Cancel at the slot gave tokens back")
	}
	if d := s.Peek("k"); d.Allowed {
		t.Fatalf("Peek at the slot of the reservation that holds the token = %+v, want denied", d)
	}
	clk.Advance(time.Second)
	wantReservation(t, "Reserve(1, 0) a second later", mustReserve(t, s, "k", 1, 0), true, 0)
}

// TestCancelOrder: a cancel gives tokens back only for the latest
// reservation on the key, never moves a later one, and is idempotent; it
// gives nothing back for another store's reservation, or one made under a
// policy since replaced, even on the same Redis key.
func TestCancelOrder(t *testing.T) {
	client := newClient(t, server(t).Addr())
	clk := clock.NewManual(unixStart)
	prefix := uniquePrefix(t)
	two := keyrate.Policy{Name: "two", Limits: []keyrate.Limit{keyrate.PerSecond(1).WithBurst(1), keyrate.PerMinute(30).WithBurst(3)}}
	open := func() *redisbucket.Store {
		return mustNew(t, client, keyrate.PerSecond(1).WithBurst(1), redisbucket.WithTimeSource(clk),
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout), keyrate.WithPolicies(two))
	}
	s, other := open(), open()
	for _, name := range []string{keyrate.DefaultPolicy, "two"} {
		t.Run(name, func(t *testing.T) {
			tier, _ := s.Tier(name)
			key := "k-" + name
			res := func() keyrate.Reservation {
				t.Helper()
				r, err := s.ReserveTier(key, tier, 1, time.Hour)
				if err != nil || !r.OK() {
					t.Fatalf("ReserveTier: %v, %v", r.OK(), err)
				}
				return r
			}
			if d, err := s.AllowTier(key, tier, 1); !d.Allowed || err != nil {
				t.Fatalf("AllowTier = %+v, %v", d, err)
			}
			a, b := res(), res()
			wantReservation(t, "A", a, true, time.Second)
			wantReservation(t, "B", b, true, 2*time.Second)
			if a.Cancel() {
				t.Fatal("Cancel of A with B reserved after it gave tokens back")
			}
			wantReservation(t, "C after A's cancel", res(), true, 3*time.Second)
			d := res()
			wantReservation(t, "D", d, true, 4*time.Second)
			copyOfD := d
			if !d.Cancel() || d.Cancel() || copyOfD.Cancel() {
				t.Fatal("Cancel of the latest reservation, twice and through a copy: want true, false, false")
			}
			if !s.Cancel(res()) {
				t.Fatal("the store's Cancel of the latest reservation gave nothing back")
			}
			if other.Cancel(res()) {
				t.Fatal("another store's Cancel, on the same Redis key, gave back this store's reservation")
			}
			if ok, err := s.CancelContext(t.Context(), keyrate.Reservation{}); ok || err != nil {
				t.Fatalf("CancelContext of the zero Reservation = %v, %v", ok, err)
			}
		})
	}
	r := mustReserve(t, s, "k-default", 1, time.Hour)
	wantReservation(t, "a reservation before SetPolicy", r, true, 5*time.Second)
	if err := s.SetPolicy(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(2).WithBurst(1)}}); err != nil {
		t.Fatal(err)
	}
	if r.Cancel() {
		t.Fatal("Cancel of a reservation made under a policy since replaced gave tokens back")
	}
}

// TestReserveDifferential drives a redisbucket.Store and the reference
// (rules.Rules on a map: Reserve, Cancel, Take, Refund) with the same
// random operations at the same times in whole µs: reservations with
// random costs and maximum waits (none, up to a few fill times, and no
// bound), under each key's policy and under tiers of one to three windows
// (one in twenty of 8), cancels of the reservations held (mostly the
// latest ones), spends, refunds, peeks, runtime changes of policy and keys
// moving between policies, the clock going forward or staying. Every
// Reservation (OK, slot, delay) and Decision must be equal, and every
// cancel must give back what the reference does.
func TestReserveDifferential(t *testing.T) {
	client := newClient(t, server(t).Addr())
	seeds := uint64(16)
	if testing.Short() {
		seeds = 2
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { reserveDifferential(t, client, seed, false) })
	}
}

// TestReserveClockBack is TestReserveDifferential with one time step in
// five going back: a reading before a reservation's slot again, or before
// the reservation itself.
func TestReserveClockBack(t *testing.T) {
	client := newClient(t, server(t).Addr())
	seeds := uint64(8)
	if testing.Short() {
		seeds = 1
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { reserveDifferential(t, client, 100+seed, true) })
	}
}

func reserveDifferential(t *testing.T, client redis.UniversalClient, seed uint64, back bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	names := []string{keyrate.DefaultPolicy, "free", "pro"}
	keys := []string{"a", "b", "c"}
	var ps []keyrate.Policy
	for _, n := range names {
		ps = append(ps, randomPolicy(rng, n))
	}
	var mu sync.Mutex
	tierOf := map[string]string{}
	policyFunc := func(key string) string {
		mu.Lock()
		defer mu.Unlock()
		return tierOf[key]
	}
	opts := []keyrate.Option{keyrate.WithPolicies(ps...), keyrate.WithPolicyFunc(policyFunc)}
	clk := clock.NewManual(unixStart)
	prefix := uniquePrefix(t)
	got := mustNew(t, client, keyrate.PerSecond(1), append(opts, redisbucket.WithTimeSource(clk),
		redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))...)
	ref := newRefStore(t, keyrate.PerSecond(1), clk, opts...)
	// A pair is a reservation from each store; cancelled, once a Cancel
	// of it gave its tokens back, after which none gives them again.
	type pair struct {
		got, want keyrate.Reservation
		cancelled bool
	}
	var held []*pair
	var trace []string
	at := time.Duration(0)
	for i := 0; i < 1500; i++ {
		key, name := keys[rng.IntN(len(keys))], names[rng.IntN(len(names))]
		tier, err := got.Tier(name)
		if err != nil {
			t.Fatal(err)
		}
		rs := ref.rules(t, name)
		keyRS, err := ref.pols.ForKey(key)
		if err != nil {
			t.Fatal(err)
		}
		where := fmt.Sprintf("op %d at +%v", i, at)
		fatalf := func(format string, args ...any) {
			t.Helper()
			v, err := client.Get(t.Context(), prefix+key).Result()
			t.Fatalf("%s\n%s: %s\n(Redis now holds %q, %v, at %s)", strings.Join(trace, "\n"), where, fmt.Sprintf(format, args...), v, err, prefix+key)
		}
		note := func(format string, args ...any) {
			trace = append(trace, where+": "+fmt.Sprintf(format, args...))
			if len(trace) > 40 {
				trace = trace[1:]
			}
		}
		// A maximum wait: none, up to three times the fill time of the
		// policy's longest window, or 1000h (not the longest duration:
		// slots beyond the reference's clock range, a decade from the
		// store's creation at 14 ticks a nanosecond, are refused there,
		// and by the script only beyond 2^62 ticks from now).
		maxWait := func(p keyrate.Policy) time.Duration {
			switch n := rng.IntN(10); {
			case n == 0:
				return 0
			case n == 1:
				return 1000 * time.Hour
			}
			var fill time.Duration
			for _, l := range p.Limits {
				fill = max(fill, l.FillTime())
			}
			return time.Duration(rng.Int64N(int64(3*fill)+1)) + time.Nanosecond
		}
		sameReservation := func(what string, g, w keyrate.Reservation, gerr, werr error) {
			t.Helper()
			note("%s = OK %v, delay %v", what, g.OK(), g.Delay())
			if gerr != nil || werr != nil || g.OK() != w.OK() || g.Delay() != w.Delay() || g.At() != w.At() || g.Cost() != w.Cost() || g.Key() != w.Key() {
				fatalf("%s = OK %v, delay %v, at +%v, %v; want OK %v, delay %v, at +%v, %v", what,
					g.OK(), g.Delay(), g.At()-unixStart, gerr, w.OK(), w.Delay(), w.At()-unixStart, werr)
			}
			if g.OK() {
				held = append(held, &pair{got: g, want: w})
			}
		}
		switch op := rng.IntN(30); {
		case op < 7:
			cost, wait := 1+rng.IntN(minBurst(rs.Policy())), maxWait(rs.Policy())
			g, gerr := got.ReserveTier(key, tier, cost, wait)
			w, werr := ref.reserve(rs, key, cost, wait)
			sameReservation(fmt.Sprintf("ReserveTier(%q, %s, %d, %v)", key, name, cost, wait), g, w, gerr, werr)
		case op < 10:
			cost, wait := 1+rng.IntN(minBurst(keyRS.Policy())), maxWait(keyRS.Policy())
			g, gerr := got.Reserve(key, cost, wait)
			w, werr := ref.reserve(keyRS, key, cost, wait)
			sameReservation(fmt.Sprintf("Reserve(%q, %d, %v) under %s", key, cost, wait, keyRS.Name()), g, w, gerr, werr)
		case op < 15:
			if len(held) == 0 {
				continue
			}
			// Mostly the latest reservations, which a cancel can give back.
			j := len(held) - 1 - min(rng.IntN(len(held)), rng.IntN(3))
			p := held[j]
			g, w := p.got.Cancel(), !p.cancelled && ref.cancel(t, p.want)
			p.cancelled = p.cancelled || w
			note("Cancel of %q's reservation of %d at +%v = %v", p.got.Key(), p.got.Cost(), p.got.At()-unixStart, g)
			if g != w {
				fatalf("Cancel of %q's reservation of %d at +%v = %v; want %v", p.got.Key(), p.got.Cost(), p.got.At()-unixStart, g, w)
			}
		case op < 18:
			cost := 1 + rng.IntN(minBurst(rs.Policy()))
			g, gerr := got.AllowTier(key, tier, cost)
			w, werr := ref.allow(rs, key, cost)
			note("AllowTier(%q, %s, %d) = %+v", key, name, cost, g)
			if g != w || gerr != nil || werr != nil {
				fatalf("AllowTier(%q, %s, %d) = %+v, %v; want %+v, %v", key, name, cost, g, gerr, w, werr)
			}
		case op < 20:
			cost := 1 + rng.IntN(minBurst(rs.Policy()))
			gerr, werr := got.RefundTier(key, tier, cost), ref.refund(rs, key, cost)
			note("RefundTier(%q, %s, %d)", key, name, cost)
			if gerr != nil || werr != nil {
				fatalf("RefundTier(%q, %s, %d) = %v; want %v", key, name, cost, gerr, werr)
			}
		case op < 22:
			if g, w := got.Peek(key), ref.peek(keyRS, key); g != w {
				fatalf("Peek(%q) under %s = %+v; want %+v", key, keyRS.Name(), g, w)
			}
		case op < 23:
			p := randomPolicy(rng, name)
			note("SetPolicy(%v)", p)
			if err := got.SetPolicy(p); err != nil {
				fatalf("SetPolicy(%v): %v", p, err)
			}
			if err := ref.pols.Set(p); err != nil {
				t.Fatal(err)
			}
		case op < 24:
			mu.Lock()
			tierOf[key] = names[rng.IntN(len(names))]
			note("%q moves to %s", key, tierOf[key])
			mu.Unlock()
		default:
			// Steps of 0, up to 10µs, 1ms, 100ms, 2s or a minute, in
			// whole µs; with back, one in five goes back (never before
			// the stores' creation).
			scale := []int64{0, 10, 1000, 100_000, 2_000_000, 60_000_000}[rng.IntN(6)]
			step := time.Duration(rng.Int64N(scale+1)) * time.Microsecond
			if back && rng.IntN(5) == 0 {
				step = -step
			}
			at = max(at+step, 0)
			clk.Set(unixStart + at)
		}
	}
}

// TestCancelAfterCarry: a cancel gives nothing back after the key went
// through a policy without the reservation's window 1 and back, with a
// refund between. Window 1's debt rides through the other policy's window
// (docs/design/carry.md: a dropped window's debt is owed by the windows
// kept, and a window added back owes the most any owed), so the spend
// back under the default policy is denied by window 1, and the cancel
// finds states the reservation did not leave.
func TestCancelAfterCarry(t *testing.T) {
	client := newClient(t, server(t).Addr())
	def := keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerSecond(1).WithBurst(5), {Rate: 1, Per: 100 * time.Millisecond, Burst: 1}}}
	one := keyrate.Policy{Name: "one", Limits: []keyrate.Limit{keyrate.PerSecond(1).WithBurst(5)}}
	clk := clock.NewManual(unixStart)
	s := openWait(t, client, keyrate.PerSecond(1), clk, keyrate.WithPolicies(def, one))
	dt, _ := s.Tier(keyrate.DefaultPolicy)
	ot, _ := s.Tier("one")
	allow := func(what string, want bool) {
		t.Helper()
		if d, err := s.AllowTier("k", dt, 1); d.Allowed != want || err != nil {
			t.Fatalf("%s: AllowTier = %+v, %v; want allowed %v", what, d, err, want)
		}
	}
	allow("the first spend", true)
	r, err := s.ReserveTier("k", dt, 1, time.Second)
	if err != nil || !r.OK() || r.Delay() != 100*time.Millisecond {
		t.Fatalf("ReserveTier = OK %v, delay %v, %v; want OK, 100ms (window 1)", r.OK(), r.Delay(), err)
	}
	if err := s.RefundTier("k", ot, 1); err != nil {
		t.Fatal(err)
	}
	allow("a spend back under the default policy", false)
	if r.Cancel() {
		t.Fatal("Cancel gave tokens back to a key whose states moved to another policy and back")
	}
	allow("a spend at the same instant", false)
}
