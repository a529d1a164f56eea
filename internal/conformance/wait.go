package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/rules"
)

// RunWait checks keyrate.WaitLimiter on a bounded store: reservations and
// their slots step by step, exact cancellation, Wait's errors and its
// cancellation, first-come-first-served waiters, a simulated stretch of
// waiters on one key against the bound, concurrent reservations and
// cancels against the bound, and decisions equal to rules.Rules' in a
// differential run. Every wait runs on the manual clock: no test sleeps.
func RunWait(t *testing.T, b Bounded) {
	t.Run("ReserveSteps", func(t *testing.T) { testReserveSteps(t, b) })
	t.Run("CancelOrder", func(t *testing.T) { testCancelOrder(t, b) })
	t.Run("CancelAfterTierMoves", func(t *testing.T) { testCancelAfterTierMoves(t, b) })
	t.Run("ReservedSlotNotShared", func(t *testing.T) { testReservedSlotNotShared(t, b) })
	t.Run("UnlimitedReservationAt", func(t *testing.T) { testUnlimitedReservationAt(t, b) })
	t.Run("CancelSeveralWindows", func(t *testing.T) { testCancelSeveralWindows(t, b) })
	t.Run("WaitErrors", func(t *testing.T) { testWaitErrors(t, b) })
	t.Run("WaitCancelled", func(t *testing.T) { testWaitCancelled(t, b) })
	t.Run("ReservationWait", func(t *testing.T) { testReservationWait(t, b) })
	t.Run("FirstComeFirstServed", func(t *testing.T) { testWaitOrder(t, b) })
	t.Run("ManyWaiters", func(t *testing.T) { testManyWaiters(t, b) })
	t.Run("SimulatedWaiters", func(t *testing.T) { testSimulatedWaiters(t, b) })
	t.Run("ConcurrentReservations", func(t *testing.T) { testConcurrentReservations(t, b) })
	t.Run("Differential", func(t *testing.T) { testWaitDifferential(t, b) })
	t.Run("Extremes", func(t *testing.T) { testWaitExtremes(t, b) })
	t.Run("ZeroAllocs", func(t *testing.T) { testWaitZeroAllocs(t, b) })
}

// waitStore is an in-process store that can wait.
type waitStore interface {
	keyrate.WaitLimiter
	keyrate.BoundedLimiter
}

func openWait(t *testing.T, b Bounded, limit keyrate.Limit, opts ...keyrate.Option) (waitStore, *clock.Manual) {
	t.Helper()
	l, clk := openPolicies(t, b, limit, opts...)
	w, ok := l.(waitStore)
	if !ok {
		t.Fatalf("%T does not implement keyrate.WaitLimiter", l)
	}
	return w, clk
}

// perSecondBurst is rate a second with the given burst.
func perSecondBurst(rate, burst int) keyrate.Limit {
	return keyrate.Limit{Rate: rate, Per: time.Second, Burst: burst}
}

func reserve(t *testing.T, l keyrate.WaitLimiter, key string, cost int, wait time.Duration) keyrate.Reservation {
	t.Helper()
	r, err := l.Reserve(key, cost, wait)
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

// testReserveSteps: one token a second, burst 2.
func testReserveSteps(t *testing.T, b Bounded) {
	l, clk := openWait(t, b, perSecondBurst(1, 2))
	wantReservation(t, "first Reserve(1, 0)", reserve(t, l, "k", 1, 0), true, 0)
	wantReservation(t, "second Reserve(1, 0)", reserve(t, l, "k", 1, 0), true, 0)
	wantReservation(t, "Reserve(1, 0) on an empty bucket", reserve(t, l, "k", 1, 0), false, time.Second)
	wantReservation(t, "Reserve(1, 999ms)", reserve(t, l, "k", 1, 999*time.Millisecond), false, time.Second)
	r1 := reserve(t, l, "k", 1, time.Second)
	wantReservation(t, "Reserve(1, 1s)", r1, true, time.Second)
	if r1.At() != start+time.Second || r1.DelayFrom(start+time.Second) != 0 || r1.Key() != "k" || r1.Cost() != 1 {
		t.Fatalf("Reserve(1, 1s) slot at %v, DelayFrom(slot) %v, key %q, cost %d; want %v, 0, k, 1", r1.At(), r1.DelayFrom(start+time.Second), r1.Key(), r1.Cost(), start+time.Second)
	}
	wantReservation(t, "Reserve(2, 2s) behind it", reserve(t, l, "k", 2, 2*time.Second), false, 3*time.Second)
	if d := l.Peek("k"); d.Allowed || d.Remaining != 0 || d.RetryAfter != 2*time.Second {
		t.Fatalf("Peek with a reservation at 1s = %+v, want denied, retry after 2s", d)
	}
	if _, err := l.Reserve("k", 3, time.Hour); !errors.Is(err, keyrate.ErrCostExceedsBurst) {
		t.Fatalf("Reserve(3) with burst 2: %v, want ErrCostExceedsBurst", err)
	}
	if _, err := l.Reserve("k", 0, time.Hour); !errors.Is(err, keyrate.ErrInvalidCost) {
		t.Fatalf("Reserve(0): %v, want ErrInvalidCost", err)
	}
	if !r1.Cancel() {
		t.Fatal("Cancel of the latest reservation before its slot gave nothing back")
	}
	r2 := reserve(t, l, "k", 1, time.Second)
	wantReservation(t, "Reserve(1, 1s) after the cancel", r2, true, time.Second)
	clk.Advance(time.Second)
	if r2.Cancel() {
		t.Fatal("Cancel at the slot gave tokens back")
	}
	if d := l.Peek("k"); d.Allowed {
		t.Fatalf("Peek at the slot of the reservation that holds the token = %+v, want denied", d)
	}
	clk.Advance(time.Second)
	wantReservation(t, "Reserve(1, 0) a second later", reserve(t, l, "k", 1, 0), true, 0)
}

// testCancelOrder: cancelling gives tokens back only for the latest
// reservation, never moves a later one, and is idempotent, copies
// included.
func testCancelOrder(t *testing.T, b Bounded) {
	l, _ := openWait(t, b, perSecondBurst(1, 1))
	l.Allow("k")
	a := reserve(t, l, "k", 1, time.Hour)
	bb := reserve(t, l, "k", 1, time.Hour)
	wantReservation(t, "A", a, true, time.Second)
	wantReservation(t, "B", bb, true, 2*time.Second)
	if a.Cancel() {
		t.Fatal("Cancel of A with B reserved after it gave tokens back: a new request would share B's slot")
	}
	wantReservation(t, "C after A's cancel", reserve(t, l, "k", 1, time.Hour), true, 3*time.Second)
	// C is the latest now; cancel it, then B, then A, unwinding.
	c := reserve(t, l, "k", 1, time.Hour)
	wantReservation(t, "D", c, true, 4*time.Second)
	copyOfC := c
	if !c.Cancel() || c.Cancel() || copyOfC.Cancel() {
		t.Fatal("Cancel of the latest reservation, twice and through a copy: want true, false, false")
	}
	if !l.Cancel(reserve(t, l, "k", 1, time.Hour)) {
		t.Fatal("the store's Cancel of the latest reservation gave nothing back")
	}
	if (keyrate.Reservation{}).Cancel() || l.Cancel(keyrate.Reservation{}) {
		t.Fatal("Cancel of the zero Reservation reported true")
	}
	denied := reserve(t, l, "k", 1, 0)
	if denied.OK() || denied.Cancel() {
		t.Fatalf("a reservation that is not OK: OK %v, and its Cancel gave tokens back", denied.OK())
	}
	other, _ := openWait(t, b, perSecondBurst(1, 1))
	mine := reserve(t, l, "k", 1, time.Hour)
	if other.Cancel(mine) {
		t.Fatal("another store's Cancel gave back this store's reservation")
	}
	if !mine.Cancel() {
		t.Fatal("Cancel of the latest reservation after another store refused it gave nothing back")
	}
}

// testCancelAfterTierMoves: a key that moved to a policy without the
// reservation's second window and back, with a refund between, must not
// have the reservation cancelled, and must not find its second window
// afresh: the window of 100ms, which policy "one" lacks, owed its debt
// through the move (carried in "one"'s window of 1s and back), so a
// request within 100ms under its burst of 1 is denied.
func testCancelAfterTierMoves(t *testing.T, b Bounded) {
	l, _ := openWait(t, b, perSecondBurst(1, 5),
		keyrate.WithPolicies(
			keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{perSecondBurst(1, 5), {Rate: 1, Per: 100 * time.Millisecond, Burst: 1}}},
			keyrate.Policy{Name: "one", Limits: []keyrate.Limit{perSecondBurst(1, 5)}},
		))
	def, _ := l.Tier(keyrate.DefaultPolicy)
	one, _ := l.Tier("one")
	if d, err := l.AllowTier("k", def, 1); err != nil || !d.Allowed {
		t.Fatalf("first request = %+v, %v", d, err)
	}
	r, err := l.ReserveTier("k", def, 1, time.Second)
	if err != nil || !r.OK() || r.Delay() != 100*time.Millisecond {
		t.Fatalf("ReserveTier = OK %v, delay %v, %v; want a slot 100ms away", r.OK(), r.Delay(), err)
	}
	if err := l.RefundTier("k", one, 1); err != nil {
		t.Fatal(err)
	}
	if d, err := l.AllowTier("k", def, 1); err != nil || d.Allowed || d.Window != 1 {
		t.Fatalf("the request back under the default policy = %+v, %v; want denied by window 1, which owes its debt again", d, err)
	}
	if r.Cancel() {
		t.Fatal("Cancel gave tokens back to a key whose states moved to another policy and back")
	}
	if d, _ := l.AllowTier("k", def, 1); d.Allowed {
		t.Fatalf("a second request within 100ms under a window of burst 1 = %+v, want denied", d)
	}
}

// testUnlimitedReservationAt is UnlimitedReservationAt on b.
func testUnlimitedReservationAt(t *testing.T, b Bounded) { UnlimitedReservationAt(t, b.openCarry()) }

// testCancelSeveralWindows is CancelSeveralWindows on b.
func testCancelSeveralWindows(t *testing.T, b Bounded) { CancelSeveralWindows(t, b.openCarry()) }

// openCarry is OpenCarry for b, on a manual clock at its epoch.
func (b Bounded) openCarry() OpenCarry {
	return func(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
		clk := clock.NewManual(time.Hour)
		l, err := b.New(t, def, clk, keyrate.WithPolicies(policies...))
		if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
			return nil, clk
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.(keyrate.PolicyLimiter), clk
	}
}

// openWaitCarry opens a store with open and returns it as a
// keyrate.WaitLimiter, with its clock.
func openWaitCarry(t *testing.T, open OpenCarry, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.WaitLimiter, *clock.Manual) {
	t.Helper()
	pl, clk, _ := openCarry(t, open, def, policies...)
	w, ok := pl.(keyrate.WaitLimiter)
	if !ok {
		t.Fatalf("%T does not implement keyrate.WaitLimiter", pl)
	}
	return w, clk
}

// UnlimitedReservationAt checks that a reservation under an unlimited
// policy is made at the store's reading, as any other (issue 31: At() was
// 0 in every in-process store, since an unlimited policy read no clock),
// and need not wait.
func UnlimitedReservationAt(t *testing.T, open OpenCarry) {
	l, clk := openWaitCarry(t, open, perSecondBurst(1, 1), keyrate.Unlimited("free"))
	free, _ := l.Tier("free")
	clk.Advance(time.Minute)
	r, err := l.ReserveTier("k", free, 5, time.Second)
	if err != nil || !r.OK() || r.At() != clk.Now() || r.Delay() != 0 {
		t.Fatalf("ReserveTier under an unlimited policy at %v = OK %v, At %v, Delay %v, %v; want OK at %v with no delay",
			clk.Now(), r.OK(), r.At(), r.Delay(), err, clk.Now())
	}
}

// CancelSeveralWindows pins the documented rule of a cancel under several
// windows (docs/design/carry.md, "Refunds and cancels"): the reservation
// was decided as if made at its slot in every window, so a window that
// did not set the slot is left as at the slot, and before the slot the key
// holds fewer tokens there than a twin that never reserved, at most what
// that window refills by the slot; from the slot on the two are alike.
// Policy [10/s burst 2, 1/s burst 2]: 2 spent at 0; at 1.5s a reservation
// of 2 waits for window 1 until 2s; cancelled at once, window 0 owes until
// 2s what it had refilled by 1.5s (issue 31's example: denied, RetryAfter
// 400ms, where the twin is allowed).
func CancelSeveralWindows(t *testing.T, open OpenCarry) {
	two := []keyrate.Limit{perSecondBurst(10, 2), perSecondBurst(1, 2)}
	l, clk := openWaitCarry(t, open, two[0], keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: two})
	for _, k := range []string{"k", "twin"} {
		if d, err := l.AllowN(k, 2); err != nil || !d.Allowed {
			t.Fatalf("AllowN(%q, 2) = %+v, %v", k, d, err)
		}
	}
	clk.Advance(1500 * time.Millisecond)
	r := reserve(t, l, "k", 2, time.Second)
	wantReservation(t, "Reserve(2) at 1.5s", r, true, 500*time.Millisecond)
	if !r.Cancel() {
		t.Fatal("Cancel of the latest reservation before its slot gave nothing back")
	}
	if d := l.Peek("k"); d.Allowed || d.Window != 0 || d.RetryAfter != 400*time.Millisecond {
		t.Fatalf("Peek after the cancel at 1.5s = %+v; want denied by window 0, RetryAfter 400ms (it stays as at the slot, 2s)", d)
	}
	if d := l.Peek("twin"); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("the twin's Peek at 1.5s = %+v; want 1 left", d)
	}
	clk.Advance(500 * time.Millisecond)
	if got, want := l.Peek("k"), l.Peek("twin"); got != want {
		t.Fatalf("at the slot, Peek = %+v; the twin that never reserved: %+v", got, want)
	}
}

// testWaitErrors: Wait fails at once, spending nothing, for a cost no wait
// allows, a done context, or a wait past the context's deadline.
func testWaitErrors(t *testing.T, b Bounded) {
	l, _ := openWait(t, b, perSecondBurst(1, 2), keyrate.WithPolicies(keyrate.Unlimited("free")))
	ctx := context.Background()
	l.Allow("k")
	before := l.Peek("k")
	if err := l.Wait(ctx, "k", 3); !errors.Is(err, keyrate.ErrCostExceedsBurst) {
		t.Fatalf("Wait(3) with burst 2: %v, want ErrCostExceedsBurst", err)
	}
	if err := l.Wait(ctx, "k", 0); !errors.Is(err, keyrate.ErrInvalidCost) {
		t.Fatalf("Wait(0): %v, want ErrInvalidCost", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(done, "k", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v, want context.Canceled", err)
	}
	// The wait for 2 tokens is 1s of the store's (manual) clock; the
	// deadline is 1ms of real time away, or already past on a busy
	// machine: either way the error is context.DeadlineExceeded.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := l.Wait(short, "k", 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past a 1ms deadline: %v, want an error matching context.DeadlineExceeded", err)
	}
	// A wait of 1s with an hour left: ErrWaitExceedsDeadline, at once.
	hour, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	slow, _ := openWait(t, b, keyrate.Limit{Rate: 1, Per: 2 * time.Hour, Burst: 2})
	slow.Allow("k")
	err := slow.Wait(hour, "k", 2)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, keyrate.ErrWaitExceedsDeadline) || hour.Err() != nil {
		t.Fatalf("Wait of 2h with an hour to the deadline: %v, want ErrWaitExceedsDeadline matching context.DeadlineExceeded, at once", err)
	}
	if d := slow.Peek("k"); d.Remaining != 1 {
		t.Fatalf("the refused Wait spent: Peek = %+v, want 1 token left", d)
	}
	if after := l.Peek("k"); after != before {
		t.Fatalf("failed Waits spent: Peek %+v before, %+v after", before, after)
	}
	var nilCtx context.Context
	if err := l.Wait(nilCtx, "k", 1); err != nil {
		t.Fatalf("Wait(nil context) with a token there: %v, want nil", err)
	}
	other, _ := openWait(t, b, perSecondBurst(1, 2), keyrate.WithPolicies(keyrate.Unlimited("free")))
	foreign, _ := other.Tier("free")
	if err := l.WaitTier(ctx, "k", foreign, 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
		t.Fatalf("WaitTier with another store's tier: %v, want ErrUnknownPolicy", err)
	}
	free, _ := l.Tier("free")
	if err := l.WaitTier(ctx, "k", free, 1000); err != nil {
		t.Fatalf("WaitTier under an unlimited policy: %v, want nil", err)
	}
	if r, err := l.ReserveTier("k", free, 5, 0); err != nil || !r.OK() || r.Delay() != 0 || r.Cancel() {
		t.Fatalf("ReserveTier under an unlimited policy = OK %v, Delay %v, %v (or its Cancel gave something back)", r.OK(), r.Delay(), err)
	}
}

// testWaitCancelled: a Wait whose context is cancelled while it sleeps
// returns the context's error, leaves no sleeper behind, and gives its
// tokens back, so the next waiter gets its slot.
func testWaitCancelled(t *testing.T, b Bounded) {
	l, clk := openWait(t, b, perSecondBurst(1, 1))
	l.Allow("k")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(ctx, "k", 1) }()
	if err := clk.AwaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait cancelled while sleeping: %v, want context.Canceled", err)
	}
	if n := clk.Sleepers(); n != 0 {
		t.Fatalf("%d sleepers left after the cancelled Wait returned", n)
	}
	wantReservation(t, "Reserve after the cancelled Wait", reserve(t, l, "k", 1, time.Hour), true, time.Second)
}

// testReservationWait: a Reservation's Wait sleeps on the store's clock
// until its slot; with a context whose deadline comes first it cancels at
// once, giving the tokens back; the zero Reservation's Wait is an error.
func testReservationWait(t *testing.T, b Bounded) {
	l, clk := openWait(t, b, perSecondBurst(1, 1))
	l.Allow("k")
	hour, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	slow, _ := openWait(t, b, keyrate.Limit{Rate: 1, Per: 2 * time.Hour, Burst: 1})
	slow.Allow("k")
	r := reserve(t, slow, "k", 1, 3*time.Hour)
	if err := r.Wait(hour); !errors.Is(err, keyrate.ErrWaitExceedsDeadline) || !errors.Is(err, context.DeadlineExceeded) || hour.Err() != nil {
		t.Fatalf("Reservation.Wait of 2h with an hour to the deadline: %v, want ErrWaitExceedsDeadline at once", err)
	}
	wantReservation(t, "Reserve after that Wait gave up", reserve(t, slow, "k", 1, 3*time.Hour), true, 2*time.Hour)

	r = reserve(t, l, "k", 1, time.Hour)
	errc := make(chan error, 1)
	go func() { errc <- r.Wait(hour) }()
	if err := clk.AwaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if at, _ := clk.Step(); at != r.At() {
		t.Fatalf("the sleeper woke at %v, want the slot %v", at, r.At())
	}
	if err := <-errc; err != nil {
		t.Fatalf("Reservation.Wait until its slot: %v", err)
	}
	if err := (keyrate.Reservation{}).Wait(context.Background()); err == nil {
		t.Fatal("the zero Reservation's Wait returned nil")
	}
}

// testWaitOrder: waiters on one key return in the order they reserved,
// each at its slot.
func testWaitOrder(t *testing.T, b Bounded) {
	const waiters = 5
	l, clk := openWait(t, b, perSecondBurst(1, 1))
	l.Allow("k")
	type ret struct {
		i  int
		at time.Duration
	}
	rets := make(chan ret, waiters)
	bg := context.Background()
	for i := range waiters {
		go func() {
			if err := l.Wait(bg, "k", 1); err != nil {
				t.Error(err)
			}
			rets <- ret{i, clk.Now()}
		}()
		if err := clk.AwaitSleepers(bg, i+1); err != nil { // i reserved before i+1 starts
			t.Fatal(err)
		}
	}
	for want := range waiters {
		if _, ok := clk.Step(); !ok {
			t.Fatalf("no sleeper for waiter %d", want)
		}
		got := <-rets
		if got.i != want || got.at != start+time.Duration(want+1)*time.Second {
			t.Fatalf("return %d: waiter %d at %v; want waiter %d at %v", want, got.i, got.at, want, start+time.Duration(want+1)*time.Second)
		}
	}
}

// testManyWaiters: 10 000 waiters on one key are 10 000 sleeping
// goroutines (the callers' own) and nothing more; a step of the clock
// wakes only the one whose slot has come, and cancelling their context
// ends them all, leaving no sleeper, timer or goroutine behind, on the
// manual clock and on the system clock's runtime timers alike. (The
// package's TestMain checks for leaked goroutines with goleak.)
func testManyWaiters(t *testing.T, b Bounded) {
	const waiters = 10_000
	for _, system := range []bool{false, true} {
		t.Run(fmt.Sprint("system=", system), func(t *testing.T) {
			var opts []keyrate.Option
			limit, slots := perSecondBurst(1, 1), time.Second
			if system { // an hour a token, so that real time passing changes nothing
				opts = append(opts, keyrate.WithClock(clock.System()))
				limit, slots = keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1}, time.Hour
			}
			l, clk := openWait(t, b, limit, opts...)
			l.Allow("k")
			base := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs := make(chan error, waiters)
			for range waiters {
				go func() { errs <- l.Wait(ctx, "k", 1) }()
			}
			if !system {
				if err := clk.AwaitSleepers(context.Background(), waiters); err != nil {
					t.Fatal(err)
				}
				if n := runtime.NumGoroutine() - base; n > waiters {
					t.Fatalf("%d goroutines more than before %d waiters", n, waiters)
				}
				clk.Step() // the first slot: one waiter's
				if err := <-errs; err != nil {
					t.Fatalf("the first waiter: %v", err)
				}
				if n := clk.Sleepers(); n != waiters-1 {
					t.Fatalf("%d sleepers after one step, want %d: a step woke more than the waiter due", n, waiters-1)
				}
			} else {
				// Every waiter has reserved once the bucket's debt covers
				// them all: the last slot is waiters-1 seconds ahead.
				for l.Peek("k").RetryAfter < (waiters-1)*slots {
					runtime.Gosched()
				}
			}
			cancel()
			want := waiters
			if !system {
				want--
			}
			for range want {
				if err := <-errs; !errors.Is(err, context.Canceled) {
					t.Fatalf("a waiter whose context was cancelled returned %v, want context.Canceled", err)
				}
			}
			if n := clk.Sleepers(); n != 0 {
				t.Fatalf("%d sleepers left after every waiter returned", n)
			}
		})
	}
}

// waitersSpan is how much clock time testSimulatedWaiters simulates: an
// hour at 1000 tokens a second, the figure; a minute under the
// race detector, which makes each of the 3.6 million waits 20-50 times
// slower.
func waitersSpan() time.Duration {
	if racetest.Enabled {
		return time.Minute
	}
	return time.Hour
}

// testSimulatedWaiters: 8 goroutines call Wait on one key at 1000 a
// second, burst 10, for a simulated stretch of time, the clock stepping
// to each earliest wake-up once all 8 sleep. The tokens returned are
// within one of what the rate allows, and the returns, at the readings at
// which each Wait returned, never exceed the bound in any window.
func testSimulatedWaiters(t *testing.T, b Bounded) { SimulatedWaiters(t, b, waitersSpan()) }

// SimulatedWaiters is RunWait's SimulatedWaiters over a simulated span of
// the given length: a store's own tests run it for the whole hour under
// the race detector too.
func SimulatedWaiters(t *testing.T, b Bounded, span time.Duration) {
	const goroutines, rate, burst = 8, 1000, 10
	limit := perSecondBurst(rate, burst)
	l, clk := openWait(t, b, limit)
	bg := context.Background()
	ctx, stop := context.WithCancel(bg)
	defer stop()
	end := start + span
	var (
		mu   sync.Mutex
		rets []time.Duration
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				if err := l.Wait(ctx, "k", 1); err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
					break
				}
				now := clk.Now()
				if now > end {
					break
				}
				mine = append(mine, now)
			}
			mu.Lock()
			rets = append(rets, mine...)
			mu.Unlock()
		}()
	}
	for {
		if err := clk.AwaitSleepers(bg, goroutines); err != nil {
			t.Fatal(err)
		}
		if now, _ := clk.Step(); now > end {
			break
		}
	}
	stop() // the waiters still asleep give up; the one woken stops by itself
	wg.Wait()
	want := int(int64(rate)*int64(span)/int64(time.Second)) + burst
	if len(rets) > want || len(rets) < want-1 {
		t.Fatalf("%d Waits returned over %v at %d/s, burst %d; want %d (within one)", len(rets), span, rate, burst, want)
	}
	admitted := make([]Admission, len(rets))
	for i, at := range rets {
		admitted[i] = Admission{at, 1}
	}
	CheckBound(t, limit, admitted)
}

// Admission is one admission for CheckBound: the clock reading it was
// admitted at (a reservation's slot, the reading a Wait returned at) and
// its cost.
type Admission struct {
	At   time.Duration
	Cost int
}

// CheckBound fails t unless the admissions, sorted by reading, keep the
// token bucket's bound over every interval: replayed in order through an
// exact rule of limit, each is allowed. (For exact limits the replay is
// the bound: it denies the first admission that would put Burst +
// Rate·T/Per over some interval.)
func CheckBound(t testing.TB, limit keyrate.Limit, admitted []Admission) {
	t.Helper()
	if len(admitted) == 0 {
		return
	}
	sorted := slices.SortedStableFunc(slices.Values(admitted), func(a, b Admission) int { return cmp.Compare(a.At, b.At) })
	first := sorted[0].At
	r, err := rules.NewRule(limit, clock.NewManual(first))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Exact() {
		t.Fatalf("CheckBound needs an exact limit, not %v", limit)
	}
	var s rules.State
	for n, a := range sorted {
		next, ok := r.Take(s, r.Ticks(a.At), a.Cost)
		if !ok {
			t.Fatalf("admission %d of %d (cost %d at +%v) puts more than %v over some interval ending there",
				n, len(sorted), a.Cost, a.At-first, limit)
		}
		s = next
	}
}

// ReserveAndCancel has goroutines goroutines each make ops reservations of
// the key "k", goroutine g on stores[g%len(stores)], with random costs up
// to limit's Burst and maximum waits up to 50ms, cancelling its latest
// reservation a third of the time and, a quarter of the time, cancelling
// again one that a Cancel gave back (any goroutine's), which must give
// nothing; it returns the reservations left standing, for CheckBound. Its
// randomness comes from seed.
func ReserveAndCancel(t testing.TB, stores []keyrate.WaitLimiter, limit keyrate.Limit, goroutines, ops int, seed uint64) []Admission {
	var (
		mu   sync.Mutex
		kept []Admission
		wg   sync.WaitGroup
		// done holds reservations a Cancel gave back: cancelling one
		// again, from any goroutine, must give nothing back.
		done []keyrate.Reservation
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			var mine []keyrate.Reservation
			for range ops {
				cost := 1 + rng.IntN(limit.Burst)
				r, err := stores[g%len(stores)].Reserve("k", cost, time.Duration(rng.IntN(50))*time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				if r.OK() {
					mine = append(mine, r)
				}
				if len(mine) > 0 && rng.IntN(3) == 0 {
					if last := mine[len(mine)-1]; last.Cancel() {
						mine = mine[:len(mine)-1]
						mu.Lock()
						done = append(done, last)
						mu.Unlock()
					}
				}
				if rng.IntN(4) == 0 {
					mu.Lock()
					var again keyrate.Reservation
					if len(done) > 0 {
						again = done[rng.IntN(len(done))]
					}
					mu.Unlock()
					if again.Cancel() {
						t.Errorf("a reservation of %d at %v, cancelled already, was cancelled again: the tokens of a later reservation given away", again.Cost(), again.At())
						return
					}
				}
			}
			mu.Lock()
			for _, r := range mine {
				kept = append(kept, Admission{r.At(), r.Cost()})
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return kept
}

// testConcurrentReservations: goroutines reserve with random costs and
// waits, and cancel their latest reservations, on one key while the clock
// moves; the reservations left standing keep the bound at their slots.
func testConcurrentReservations(t *testing.T, b Bounded) {
	for _, limit := range []keyrate.Limit{perSecondBurst(1000, 1), perSecondBurst(1000, 20)} {
		t.Run(fmt.Sprint("burst=", limit.Burst), func(t *testing.T) {
			l, clk := openWait(t, b, limit)
			const goroutines = 8
			ops := 3000
			if racetest.Enabled {
				ops = 1000
			}
			stop := make(chan struct{})
			go func() { // the clock: 0-2ms steps, as fast as it can
				rng := rand.New(rand.NewPCG(1, 2))
				for {
					select {
					case <-stop:
						return
					default:
						clk.Advance(time.Duration(rng.IntN(2000)) * time.Microsecond)
					}
				}
			}()
			kept := ReserveAndCancel(t, []keyrate.WaitLimiter{l}, limit, goroutines, ops, 7)
			close(stop)
			CheckBound(t, limit, kept)
		})
	}
}

// testWaitDifferential drives a store and the reference (rules.Rules on
// a plain map) with the same random reservations, cancels, spends,
// refunds and time steps under one- and two-window policies, and compares
// every reservation and decision.
func testWaitDifferential(t *testing.T, b Bounded) {
	policies := []keyrate.Policy{
		{Name: "one", Limits: []keyrate.Limit{perSecondBurst(5, 3)}},
		{Name: "two", Limits: []keyrate.Limit{perSecondBurst(10, 4), {Rate: 30, Per: time.Minute, Burst: 6}}},
	}
	l, clk := openWait(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(policies...))
	ref := newRefStore(t, clk, policies)
	rng := rand.New(rand.NewPCG(11, 12))
	type pair struct{ got, want keyrate.Reservation }
	var held []pair
	for op := range 4000 {
		key := fmt.Sprint("k", rng.IntN(3))
		name := policies[rng.IntN(len(policies))].Name
		tier, _ := l.Tier(name)
		switch n := rng.IntN(10); {
		case n < 4:
			cost, wait := 1+rng.IntN(3), time.Duration(rng.IntN(3000))*time.Millisecond
			got, err := l.ReserveTier(key, tier, cost, wait)
			if err != nil {
				t.Fatalf("op %d: ReserveTier: %v", op, err)
			}
			want := ref.reserve(key, name, cost, wait)
			if got.OK() != want.OK() || got.At() != want.At() || got.Delay() != want.Delay() {
				t.Fatalf("op %d at %v: ReserveTier(%s, %s, %d, %v) = OK %v at %v (delay %v); reference OK %v at %v (delay %v)",
					op, clk.Now()-start, key, name, cost, wait, got.OK(), got.At()-start, got.Delay(), want.OK(), want.At()-start, want.Delay())
			}
			if got.OK() {
				held = append(held, pair{got, want})
			}
		case n < 6 && len(held) > 0:
			i := rng.IntN(len(held))
			p := held[i]
			if got, want := p.got.Cancel(), ref.cancel(p.want); got != want {
				t.Fatalf("op %d at %v: Cancel of %s's reservation at %v = %v, reference %v", op, clk.Now()-start, p.got.Key(), p.got.At()-start, got, want)
			}
		case n < 8:
			cost := 1 + rng.IntN(3)
			got, err := l.AllowTier(key, tier, cost)
			if want := ref.allow(key, name, cost); err != nil || got != want {
				t.Fatalf("op %d: AllowTier = %+v, %v; reference %+v", op, got, err, want)
			}
		case n < 9:
			cost := 1 + rng.IntN(3)
			if err := l.RefundTier(key, tier, cost); err != nil {
				t.Fatal(err)
			}
			ref.refund(key, name, cost)
		default:
			clk.Advance(time.Duration(rng.IntN(700)) * time.Millisecond)
		}
	}
}

// reserve is the reference's ReserveTier.
func (r *refStore) reserve(key, policy string, cost int, wait time.Duration) keyrate.Reservation {
	rs := r.rules(policy)
	now := r.clk.Now()
	s := r.bucket(key, rs, now)
	_, denied := rs.Reserve(s, now, cost, wait)
	r.keys[key] = refBucket{rs, s}
	return rs.Reserved(nil, key, s, now, cost, wait, denied)
}

// cancel is the reference's Cancel.
func (r *refStore) cancel(res keyrate.Reservation) bool {
	b, ok := r.keys[res.Key()]
	if !ok || b.rs != rules.ReservationRules(res) || !res.OK() {
		return false
	}
	return b.rs.Cancel(b.s, rules.ReservationEnd(res), r.clk.Now(), res.At(), res.Cost())
}

// testWaitExtremes: the edges an adversarial review found. A store whose
// clock reads below 0 gives a new key a full bucket; past the clock range,
// where time stops, reservations are refused rather than given slots that
// never come; a reading before the epoch is the epoch, so a reservation's
// Delay never exceeds its wait; a Reservation forged with a cost its
// policy cannot have cancels nothing.
func testWaitExtremes(t *testing.T, b Bounded) {
	open := func(limit keyrate.Limit, clk *clock.Manual) waitStore {
		l, err := b.New(t, limit, clk)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.(waitStore)
	}
	one := perSecondBurst(1, 1)
	if d, err := open(perSecondBurst(1, 5), clock.NewManual(-time.Hour)).AllowN("new", 1); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("a new key on a clock reading -1h = %+v, %v; want allowed with 4 left", d, err)
	}

	clk := clock.NewManual(0)
	l := open(one, clk)
	clk.Set(1<<62 + time.Hour) // past the clock range at one tick a nanosecond
	admitted := 0
	for range 10 {
		if r, err := l.Reserve("k", 1, time.Hour); err != nil {
			t.Fatal(err)
		} else if r.OK() {
			admitted++
		}
	}
	if admitted > 1 {
		t.Fatalf("past the clock range, %d reservations of 1 admitted with burst 1; time stops there, so at most 1", admitted)
	}

	clk = clock.NewManual(0)
	l = open(one, clk)
	l.Allow("k")
	clk.Set(-time.Hour)
	if r := reserve(t, l, "k", 1, time.Second); r.OK() && r.Delay() > time.Second {
		t.Fatalf("Reserve(1, 1s) on a clock set back before the epoch = OK with Delay %v, above its wait", r.Delay())
	}

	clk = clock.NewManual(0)
	l = open(perSecondBurst(1, 2), clk)
	l.AllowN("k", 2)
	r := reserve(t, l, "k", 1, time.Hour)
	for _, cost := range []int{3, 0, -1 << 40} {
		forged := rules.NewReservation(l, r.Key(), rules.ReservationRules(r), rules.ReservationEnd(r), 0, r.At(), time.Hour, cost, true)
		if forged.Cancel() {
			t.Fatalf("a Reservation forged with cost %d (burst 2) was cancelled", cost)
		}
	}
	if !r.Cancel() {
		t.Fatal("the real reservation could not be cancelled after the forged ones")
	}
}

// testWaitZeroAllocs: Reserve and Cancel on a known key, and a Wait that
// need not sleep, allocate nothing; a reservation that must wait
// allocates one object, the flag that lets it be cancelled once.
func testWaitZeroAllocs(t *testing.T, b Bounded) {
	l, _ := openWait(t, b, keyrate.PerSecond(1e6))
	bg := context.Background()
	l.Allow("k")
	if n := testing.AllocsPerRun(200, func() {
		l.Wait(bg, "k", 1)
		r, _ := l.Reserve("k", 1, time.Second)
		r.Cancel()
	}); n != 0 {
		t.Fatalf("Wait with a token there, Reserve and Cancel on a known key: %v allocations per run, want 0", n)
	}
	l, _ = openWait(t, b, keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1})
	l.Allow("k")
	if n := testing.AllocsPerRun(200, func() {
		r, _ := l.Reserve("k", 1, 2*time.Hour)
		if !r.OK() || r.Delay() == 0 || !r.Cancel() {
			t.Fatalf("Reserve of a token an hour away = %+v, or its Cancel gave nothing back", r)
		}
	}); n != 1 {
		t.Fatalf("Reserve and Cancel of a reservation that waits: %v allocations per run, want 1", n)
	}
}

// CancelRace is the deterministic regression test for a store whose Cancel
// reads the clock outside any lock (atomicbucket: load the state, read the
// clock, compare-and-swap): a reservation made between Cancel's load and
// its swap, run by a hook on the clock reading Cancel takes, must make
// that Cancel give nothing back, since the new reservation's slot stands
// behind the cancelled tokens. (A store that reads the clock under its
// lock cannot be interleaved there, and would deadlock on the hook.)
func CancelRace(t *testing.T, b Bounded) {
	clk := NewHookClock(start)
	l, err := b.New(t, perSecondBurst(1, 1), clk.Manual, keyrate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := l.(keyrate.WaitLimiter)
	w.Allow("k")
	a := reserve(t, w, "k", 1, time.Hour)
	var later keyrate.Reservation
	clk.AtNextReading(func() { later = reserve(t, w, "k", 1, time.Hour) })
	if a.Cancel() {
		t.Fatal("Cancel gave A's tokens back although B reserved behind them while it ran")
	}
	if !clk.Fired() || !later.OK() || later.Delay() != 2*time.Second {
		t.Fatalf("the reservation behind A did not run as planned (fired %v, OK %v, delay %v)", clk.Fired(), later.OK(), later.Delay())
	}
	if !later.Cancel() || !a.Cancel() {
		t.Fatal("cancelling B, then A, did not give both back")
	}
	wantReservation(t, "Reserve after both cancels", reserve(t, w, "k", 1, time.Hour), true, time.Second)
}

// testReservedSlotNotShared: a reservation of a key's whole burst owns its slot:
// another goroutine's call on the key runs at the reservation's reading
// (a hook on it), the reservation waits for what that call left, and
// once the key has denied a call, no call at the slot is admitted. A store
// that keeps part of a key's tokens elsewhere (atomicbucket's hot keys'
// shards) and gives them back to the key's state while the reservation
// waits lets calls share the slot: up to what was given back more than
// Burst at one reading. (Every store reads the clock for a reservation
// outside its locks: the hook's call would wait for one held.)
func testReservedSlotNotShared(t *testing.T, b Bounded) {
	const burst = 1000
	clk := NewHookClock(start)
	l, err := b.New(t, perSecondBurst(1_000_000, burst), clk.Manual, keyrate.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := l.(keyrate.WaitLimiter)
	if !w.Allow("k") {
		t.Fatal("the first call was denied")
	}
	clk.AtNextReading(func() {
		done := make(chan bool)
		go func() { done <- w.Allow("k") }()
		if !<-done {
			t.Error("the call at the reservation's reading was denied")
		}
	})
	r := reserve(t, w, "k", burst, time.Second)
	if !clk.Fired() || !r.OK() || r.Delay() <= 0 {
		t.Fatalf("the reservation did not run as planned (fired %v, OK %v, delay %v)", clk.Fired(), r.OK(), r.Delay())
	}
	// Calls now get only what the other call's store set aside for the
	// key before the reservation (a hot key's batch, if this goroutine's
	// shard is that call's); the first denial gives back what is left.
	for i := 0; i <= burst && w.Allow("k"); i++ {
	}
	clk.Advance(r.Delay())
	n := 0
	for ; n <= burst && w.Allow("k"); n++ {
	}
	if n != 0 {
		t.Fatalf("at the slot of a reservation of the whole burst (%v), %d more calls were admitted: %d at one reading, Burst %d", r.Delay(), n, burst+n, burst)
	}
}
