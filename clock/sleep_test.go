package clock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
)

// sleepOn starts a goroutine sleeping on c until t and returns the channel
// that gets SleepUntil's result and the reading it returned at.
func sleepOn(ctx context.Context, c *clock.Manual, t time.Duration) chan [2]any {
	out := make(chan [2]any, 1)
	go func() {
		err := clock.SleepUntil(ctx, c, t)
		out <- [2]any{err, c.Now()}
	}()
	return out
}

func TestManualWakesDueSleepers(t *testing.T) {
	bg := context.Background()
	c := clock.NewManual(0)
	at3, at1, at2 := sleepOn(bg, c, 3*time.Second), sleepOn(bg, c, time.Second), sleepOn(bg, c, 2*time.Second)
	if err := c.AwaitSleepers(bg, 3); err != nil {
		t.Fatal(err)
	}
	if next, ok := c.Next(); !ok || next != time.Second {
		t.Fatalf("Next() = %v, %v; want 1s, true", next, ok)
	}
	c.Advance(1500 * time.Millisecond)
	if got := <-at1; got[0] != nil || got[1] != 1500*time.Millisecond {
		t.Fatalf("the 1s sleeper returned %v at %v, want nil at 1.5s", got[0], got[1])
	}
	if n := c.Sleepers(); n != 2 {
		t.Fatalf("Sleepers() = %d after waking one of three, want 2", n)
	}
	c.Set(time.Second) // backwards: wakes nobody
	if n := c.Sleepers(); n != 2 {
		t.Fatalf("Sleepers() = %d after setting the clock back, want 2", n)
	}
	if now, ok := c.Step(); !ok || now != 2*time.Second {
		t.Fatalf("Step() = %v, %v; want 2s, true", now, ok)
	}
	if got := <-at2; got[0] != nil || got[1] != 2*time.Second {
		t.Fatalf("the 2s sleeper returned %v at %v, want nil at 2s", got[0], got[1])
	}
	c.Set(10 * time.Second)
	if got := <-at3; got[0] != nil {
		t.Fatalf("the 3s sleeper returned %v, want nil", got[0])
	}
	if now, ok := c.Step(); ok || now != 10*time.Second {
		t.Fatalf("Step() with nobody asleep = %v, %v; want 10s, false", now, ok)
	}
}

func TestManualSleepCancelled(t *testing.T) {
	bg := context.Background()
	c := clock.NewManual(0)
	ctx, cancel := context.WithCancel(bg)
	out := sleepOn(ctx, c, time.Hour)
	if err := c.AwaitSleepers(bg, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if got := <-out; !errors.Is(got[0].(error), context.Canceled) {
		t.Fatalf("SleepUntil after cancel = %v, want context.Canceled", got[0])
	}
	if n := c.Sleepers(); n != 0 {
		t.Fatalf("Sleepers() = %d after the sleeper gave up, want 0", n)
	}
	if err := clock.SleepUntil(ctx, c, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepUntil with a done context = %v, want context.Canceled", err)
	}
	if err := clock.SleepUntil(ctx, c, 0); err != nil {
		t.Fatalf("SleepUntil for a reading already there, with a done context = %v, want nil", err)
	}
	short, cancel := context.WithCancel(bg)
	cancel()
	if err := c.AwaitSleepers(short, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitSleepers with a done context and nobody asleep = %v, want context.Canceled", err)
	}
}

// scripted is a Clock that is not a Sleeper and reads the next of its
// readings each time (the last one forever): a clock that lags behind the
// runtime's, as a Coarse clock can.
type scripted struct {
	readings []time.Duration
	next     atomic.Int64
}

func (s *scripted) Now() time.Duration {
	i := min(int(s.next.Add(1)-1), len(s.readings)-1)
	return s.readings[i]
}

// TestSleepUntilNeverEarly: for a clock that is not a Sleeper, SleepUntil
// sleeps on runtime timers and reads the clock after each, sleeping again
// while the clock has not reached the reading: it returns only once the
// clock reads it.
func TestSleepUntilNeverEarly(t *testing.T) {
	c := &scripted{readings: []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}}
	if err := clock.SleepUntil(context.Background(), c, 3*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := c.next.Load(); n != 4 {
		t.Fatalf("SleepUntil read the clock %d times, want 4 (returning only at the reading 3ms)", n)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.SleepUntil(done, clock.System(), clock.System().Now()+time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("SleepUntil an hour ahead with a done context = %v, want context.Canceled at once", err)
	}
}

// TestSleepUntilNilArguments: a nil context is context.Background(), and a
// nil clock or nil *Manual is System(): no panic.
func TestSleepUntilNilArguments(t *testing.T) {
	var nilCtx context.Context
	var nilManual *clock.Manual
	for _, c := range []clock.Clock{nil, nilManual} {
		if err := clock.SleepUntil(nilCtx, c, 0); err != nil {
			t.Fatalf("SleepUntil(nil, %#v, 0) = %v, want nil", c, err)
		}
	}
}
