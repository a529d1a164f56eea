package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// RunObserver checks a store's keyrate.WithObserver: every call of Allow,
// AllowN, AllowTier, Reserve, ReserveTier, Wait and WaitTier is reported
// once, with its key, policy, cost and outcome, errors included, and the
// reports cost no allocation.
func RunObserver(t *testing.T, b Bounded) {
	t.Run("Events", func(t *testing.T) { testObserverEvents(t, b) })
	t.Run("PolicyFunc", func(t *testing.T) { testObserverPolicyFunc(t, b) })
	t.Run("Concurrent", func(t *testing.T) { testObserverConcurrent(t, b) })
	t.Run("TypedNil", func(t *testing.T) { testObserverTypedNil(t, b) })
	t.Run("ZeroAllocs", func(t *testing.T) { testObserverZeroAllocs(t, b) })
	t.Run("WaitDone", func(t *testing.T) { testObserverWaitDone(t, b) })
}

// Recorder is a keyrate.Observer that keeps every event, for tests of
// stores and middleware.
type Recorder struct {
	mu     sync.Mutex
	events []keyrate.Event
}

// Observe keeps e.
func (r *Recorder) Observe(e keyrate.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Take returns the events so far and forgets them.
func (r *Recorder) Take() []keyrate.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// SameEvents fails t unless got equals want, comparing errors with
// errors.Is against want's.
func SameEvents(t testing.TB, what string, got, want []keyrate.Event) {
	t.Helper()
	eq := func(g, w keyrate.Event) bool {
		gerr, werr := g.Err, w.Err
		g.Err, w.Err = nil, nil
		return g == w && (gerr == nil) == (werr == nil) && (werr == nil || errors.Is(gerr, werr))
	}
	if !slices.EqualFunc(got, want, eq) {
		t.Errorf("%s: events\n got %+v\nwant %+v", what, got, want)
	}
}

func testObserverEvents(t *testing.T, b Bounded) {
	rec := &Recorder{}
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(2)}}
	l, clk := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(pro), keyrate.WithObserver(rec))
	tier, err := l.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := l.(keyrate.WaitLimiter)
	if !ok {
		t.Fatalf("%T is not a keyrate.WaitLimiter", l)
	}
	def := keyrate.DefaultPolicy

	l.Allow("a")
	l.Allow("a")
	SameEvents(t, "Allow, Allow", rec.Take(), []keyrate.Event{
		{Key: "a", Policy: def, Cost: 1, Allowed: true},
		{Key: "a", Policy: def, Cost: 1},
	})

	l.AllowN("b", 1)
	l.AllowN("b", 0)
	l.AllowN("b", 5)
	SameEvents(t, "AllowN", rec.Take(), []keyrate.Event{
		{Key: "b", Policy: def, Cost: 1, Allowed: true},
		{Key: "b", Policy: def, Cost: 0, Err: keyrate.ErrInvalidCost},
		{Key: "b", Policy: def, Cost: 5, Err: keyrate.ErrCostExceedsBurst},
	})

	l.AllowTier("c", tier, 2)
	l.AllowTier("c", tier, 1)
	other, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(pro))
	foreign, err := other.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	l.AllowTier("c", foreign, 1)
	SameEvents(t, "AllowTier", rec.Take(), []keyrate.Event{
		{Key: "c", Policy: "pro", Cost: 2, Allowed: true},
		{Key: "c", Policy: "pro", Cost: 1},
		{Key: "c", Policy: "pro", Cost: 1, Err: keyrate.ErrUnknownPolicy},
	})

	w.Reserve("d", 1, 0)
	r, _ := w.Reserve("d", 1, time.Second)
	w.Reserve("d", 1, time.Millisecond)
	w.ReserveTier("e", tier, 1, 0)
	SameEvents(t, "Reserve", rec.Take(), []keyrate.Event{
		{Key: "d", Policy: def, Cost: 1, Allowed: true},
		{Key: "d", Policy: def, Cost: 1, Allowed: true}, // reserved for a slot 1s away
		{Key: "d", Policy: def, Cost: 1},
		{Key: "e", Policy: "pro", Cost: 1, Allowed: true},
	})
	if !r.OK() || r.Delay() != time.Second {
		t.Fatalf("Reserve with a wait: OK %v, Delay %v; want a slot 1s away", r.OK(), r.Delay())
	}
	r.Cancel()
	rec.Take()

	if err := w.Wait(context.Background(), "f", 1); err != nil {
		t.Fatal(err)
	}
	if err := w.WaitTier(context.Background(), "f", tier, 3); err == nil {
		t.Fatal("WaitTier with a cost above the burst: no error")
	}
	SameEvents(t, "Wait", rec.Take(), []keyrate.Event{
		{Key: "f", Policy: def, Cost: 1, Allowed: true},
		{Key: "f", Policy: "pro", Cost: 3, Err: keyrate.ErrCostExceedsBurst},
	})

	clk.Advance(time.Second)
	l.Peek("a")
	l.Sweep()
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("Peek and Sweep reported %+v; they decide nothing", got)
	}
}

func testObserverPolicyFunc(t *testing.T, b Bounded) {
	rec := &Recorder{}
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(2)}}
	pick := func(key string) string { return map[string]string{"p": "pro", "x": "gold"}[key] }
	l, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(pro),
		keyrate.WithPolicyFunc(pick), keyrate.WithObserver(rec))
	l.Allow("p")
	l.Allow("q")
	l.Allow("x")
	l.AllowN("x", 1)
	SameEvents(t, "WithPolicyFunc", rec.Take(), []keyrate.Event{
		{Key: "p", Policy: "pro", Cost: 1, Allowed: true},
		{Key: "q", Policy: keyrate.DefaultPolicy, Cost: 1, Allowed: true},
		{Key: "x", Policy: "gold", Cost: 1, Err: keyrate.ErrUnknownPolicy},
		{Key: "x", Policy: "gold", Cost: 1, Err: keyrate.ErrUnknownPolicy},
	})
}

// counter is an Observer that counts allowed decisions, allocating
// nothing.
type counter struct {
	mu             sync.Mutex
	allowed, calls int
}

func (c *counter) Observe(e keyrate.Event) {
	c.mu.Lock()
	c.calls++
	if e.Allowed {
		c.allowed++
	}
	c.mu.Unlock()
}

// testObserverConcurrent: the observer sees exactly the calls made and
// exactly the admissions the callers saw.
func testObserverConcurrent(t *testing.T, b Bounded) {
	c := &counter{}
	l, _ := openPolicies(t, b, keyrate.PerSecond(100), keyrate.WithObserver(c))
	const g, n = 8, 50
	allowed := hammer(g, n, func(gi, i int) bool { return l.Allow("hot") })
	if c.calls != g*n || int64(c.allowed) != allowed || allowed != 100 {
		t.Errorf("observer saw %d calls, %d allowed; callers made %d and saw %d allowed (want 100)", c.calls, c.allowed, g*n, allowed)
	}
}

func testObserverTypedNil(t *testing.T, b Bounded) {
	var nilRec *Recorder
	for _, o := range []keyrate.Observer{nilRec, keyrate.ObserverFunc(nil)} {
		_, err := b.New(t, keyrate.PerSecond(1), clock.NewManual(start), keyrate.WithObserver(o))
		if !errors.Is(err, keyrate.ErrInvalidOption) {
			t.Errorf("WithObserver(%T nil): New returned %v, want ErrInvalidOption", o, err)
		}
	}
}

func testObserverZeroAllocs(t *testing.T, b Bounded) {
	c := &counter{}
	lim := keyrate.Every(time.Nanosecond).WithBurst(1 << 20)
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{lim}}
	l, _ := openPolicies(t, b, lim, keyrate.WithObserver(c), keyrate.WithPolicies(pro))
	l.Allow("k")
	if n := testing.AllocsPerRun(200, func() { l.Allow("k"); l.AllowN("k", 1) }); n != 0 {
		t.Errorf("Allow and AllowN with an observer: %v allocs, want 0", n)
	}
	tier, err := l.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	w, ok := l.(keyrate.WaitLimiter)
	if !ok {
		t.Fatalf("%T is not a keyrate.WaitLimiter", l)
	}
	ctx := context.Background()
	l.AllowTier("k", tier, 1)
	for name, f := range map[string]func(){
		"AllowTier": func() { l.AllowTier("k", tier, 1) },
		"Reserve":   func() { w.Reserve("k", 1, time.Second) },
		"Wait":      func() { w.Wait(ctx, "k", 1) },
		"WaitTier":  func() { w.WaitTier(ctx, "k", tier, 1) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s with an observer: %v allocs, want 0", name, n)
		}
	}
}

// testObserverWaitDone: a Wait or WaitTier whose context is done before
// the call is still one call, reported once with the context's error.
func testObserverWaitDone(t *testing.T, b Bounded) {
	rec := &Recorder{}
	pro := keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerSecond(2)}}
	l, _ := openPolicies(t, b, keyrate.PerSecond(1), keyrate.WithPolicies(pro), keyrate.WithObserver(rec))
	w, ok := l.(keyrate.WaitLimiter)
	if !ok {
		t.Fatalf("%T is not a keyrate.WaitLimiter", l)
	}
	tier, err := l.Tier("pro")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx, "a", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
	if err := w.WaitTier(ctx, "a", tier, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTier with a cancelled context = %v, want context.Canceled", err)
	}
	SameEvents(t, "Wait, WaitTier with a cancelled context", rec.Take(), []keyrate.Event{
		{Key: "a", Policy: keyrate.DefaultPolicy, Cost: 1, Err: context.Canceled},
		{Key: "a", Policy: "pro", Cost: 1, Err: context.Canceled},
	})
}
