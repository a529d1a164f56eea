package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
)

// This file checks what the package documentation promises about zero
// values, nil arguments, Close and the manual clock's stepping.

// "Its zero value reads 0"; Advance "moves the clock by d, which may be
// negative ... and returns the new reading"; Set moves it "forwards or
// backwards".
func TestClaimManualZeroAndBackwards(t *testing.T) {
	var m clock.Manual
	if m.Now() != 0 {
		t.Fatalf("zero Manual reads %v, want 0", m.Now())
	}
	if got := m.Advance(-time.Second); got != -time.Second || m.Now() != -time.Second {
		t.Errorf("Advance(-1s) = %v, Now %v; want -1s", got, m.Now())
	}
	m.Set(time.Hour)
	if m.Now() != time.Hour {
		t.Errorf("Set(1h): Now = %v", m.Now())
	}
	if got := clock.NewManual(42).Now(); got != 42 {
		t.Errorf("NewManual(42).Now() = %v", got)
	}
}

// Step: "returns the clock's reading, and false if nobody sleeps on the
// clock (it then changes nothing)"; Next: "false if nobody sleeps";
// Sleepers counts them.
func TestClaimManualStepWithoutSleepers(t *testing.T) {
	m := clock.NewManual(5)
	if at, ok := m.Step(); ok || at != 5 || m.Now() != 5 {
		t.Errorf("Step with no sleepers = %v, %v; Now %v; want 5, false, unchanged", at, ok, m.Now())
	}
	if _, ok := m.Next(); ok || m.Sleepers() != 0 {
		t.Errorf("Next with no sleepers: ok %v, Sleepers %d", ok, m.Sleepers())
	}
}

// Sleeper.SleepUntil: "It returns nil at once if the clock reads t already,
// even if ctx is done"; otherwise a done ctx returns ctx.Err().
// AwaitSleepers returns ctx.Err() when ctx is done first.
func TestClaimManualSleepUntilDoneContext(t *testing.T) {
	m := clock.NewManual(10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.SleepUntil(ctx, 10); err != nil {
		t.Errorf("SleepUntil(done ctx, now) = %v, want nil", err)
	}
	if err := m.SleepUntil(ctx, 11); err != context.Canceled {
		t.Errorf("SleepUntil(done ctx, later) = %v, want context.Canceled", err)
	}
	if m.Sleepers() != 0 {
		t.Errorf("a sleep that returned left %d sleepers", m.Sleepers())
	}
	if err := m.AwaitSleepers(ctx, 1); err != context.Canceled {
		t.Errorf("AwaitSleepers(done ctx, 1) = %v, want context.Canceled", err)
	}
	if err := m.AwaitSleepers(ctx, 0); err != nil {
		t.Errorf("AwaitSleepers(ctx, 0) = %v, want nil: none are needed", err)
	}
}

// SleepUntil (the function): "a nil ctx is context.Background(), a nil c,
// or a nil *Manual, is System(); it returns nil at once ... if c reads t
// already".
func TestClaimSleepUntilNils(t *testing.T) {
	var nilManual *clock.Manual
	for _, c := range []clock.Clock{nil, nilManual} {
		if err := clock.SleepUntil(nil, c, clock.System().Now()); err != nil {
			t.Errorf("SleepUntil(nil, %T(nil), now) = %v, want nil", c, err)
		}
	}
	m := clock.NewManual(3)
	done := make(chan error, 1)
	go func() { done <- clock.SleepUntil(context.Background(), m, 7) }()
	if err := m.AwaitSleepers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	m.Advance(3)
	select {
	case err := <-done:
		t.Fatalf("woke at 6, before 7: %v", err)
	default:
	}
	if _, ok := m.Step(); !ok {
		t.Fatal("Step found no sleeper")
	}
	if err := <-done; err != nil || m.Now() != 7 {
		t.Errorf("SleepUntil woke with %v at %v, want nil at 7", err, m.Now())
	}
}

// NewCoarse: "DefaultResolution, 1ms, if resolution ≤ 0"; "Readings never go
// backwards", never ahead of System; Close: "Now keeps working, frozen at the
// last reading. Close may be called more than once."
func TestClaimCoarseClose(t *testing.T) {
	for _, res := range []time.Duration{0, -time.Hour, time.Microsecond} {
		c := clock.NewCoarse(res)
		prev := c.Now()
		for range 1000 {
			now := c.Now()
			if now < prev || now > clock.System().Now() {
				t.Fatalf("NewCoarse(%v): reading %v after %v, System %v", res, now, prev, clock.System().Now())
			}
			prev = now
		}
		c.Close()
		c.Close()
		frozen := c.Now()
		if c.Now() != frozen {
			t.Errorf("NewCoarse(%v): Now moved after Close", res)
		}
	}
}
