package clock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
)

// This file calls the clocks the way a careless user might: a nil context
// where clock.SleepUntil takes one, and a Coarse that NewCoarse did not
// make. Each gets its documented answer, never a panic or a hang.

// recovered runs f and returns its panic, if any, as an error.
func recovered(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	f()
	return nil
}

// Manual.SleepUntil and AwaitSleepers take a nil ctx as
// context.Background(), as the package's SleepUntil does: the store's Wait
// passes its caller's ctx down, and a test calls them directly.
func TestMisuseManualNilContext(t *testing.T) {
	var nilCtx context.Context
	m := clock.NewManual(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first := make(chan error, 1)
	go func() { first <- m.SleepUntil(ctx, 9) }()
	var err error
	if p := recovered(func() { err = m.AwaitSleepers(nilCtx, 1) }); p != nil || err != nil {
		t.Fatalf("AwaitSleepers(nil, 1) with one asleep = %v, %v; want nil", err, p)
	}

	done := make(chan error, 1)
	go func() {
		var err error
		if p := recovered(func() { err = m.SleepUntil(nilCtx, 5) }); p != nil {
			err = p
		}
		done <- err
	}()
	awaited := make(chan error, 1)
	go func() { awaited <- m.AwaitSleepers(ctx, 2) }()
	select {
	case err := <-done:
		t.Fatalf("SleepUntil(nil, 5) returned %v with the clock at 0", err)
	case <-awaited:
	}
	m.Set(5)
	if err := <-done; err != nil {
		t.Errorf("SleepUntil(nil, 5) = %v, want nil once the clock reads 5", err)
	}
	m.Set(9)
	if err := <-first; err != nil {
		t.Errorf("SleepUntil(ctx, 9) = %v", err)
	}
}

// A Coarse that NewCoarse did not make (the zero value) reads 0 and its
// Close returns at once: there is no goroutine to stop. A stale reading of
// 0 can only deny more.
func TestMisuseZeroCoarse(t *testing.T) {
	var c clock.Coarse
	if c.Now() != 0 {
		t.Errorf("zero Coarse reads %v, want 0", c.Now())
	}
	closed := make(chan error, 1)
	go func() { closed <- recovered(func() { c.Close(); c.Close() }) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close of a zero Coarse: %v", err)
		}
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("Close of a zero Coarse did not return")
	}
}

// Close "may be called more than once": here from several goroutines at
// once while others read Now (a race the race detector would see); every
// Close returns only once the goroutine has stopped, so the reading is
// frozen after any of them.
func TestMisuseCoarseConcurrentClose(t *testing.T) {
	c := clock.NewCoarse(time.Microsecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Now()
			}
		}()
		go func() {
			defer wg.Done()
			c.Close()
			frozen := c.Now()
			for range 100 {
				if c.Now() != frozen {
					t.Error("Now moved after Close returned")
					return
				}
			}
		}()
	}
	wg.Wait()
}
