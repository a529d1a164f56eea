package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
)

func TestSystemIsMonotonic(t *testing.T) {
	c := clock.System()
	prev := c.Now()
	if prev < 0 {
		t.Fatalf("System().Now() = %v, want >= 0 (time since process start)", prev)
	}
	for i := 0; i < 10000; i++ {
		now := c.Now()
		if now < prev {
			t.Fatalf("reading %d went backwards: %v after %v", i, now, prev)
		}
		prev = now
	}
	if clock.System() != c {
		t.Fatal("System() returned a different clock on a second call")
	}
}

func TestSystemAllocatesNothing(t *testing.T) {
	c := clock.System()
	if n := testing.AllocsPerRun(100, func() { c.Now() }); n != 0 {
		t.Fatalf("System().Now() allocates %v times, want 0", n)
	}
}

func TestManual(t *testing.T) {
	m := clock.NewManual(5 * time.Second)
	steps := []struct {
		do   func()
		want time.Duration
	}{
		{func() {}, 5 * time.Second},
		{func() { m.Advance(time.Second) }, 6 * time.Second},
		{func() { m.Advance(-2 * time.Second) }, 4 * time.Second},
		{func() { m.Set(time.Hour) }, time.Hour},
		{func() { m.Set(-time.Hour) }, -time.Hour},
	}
	for i, s := range steps {
		s.do()
		if got := m.Now(); got != s.want {
			t.Fatalf("step %d: Now() = %v, want %v", i, got, s.want)
		}
	}
	var zero clock.Manual
	if zero.Now() != 0 {
		t.Fatalf("zero Manual reads %v, want 0", zero.Now())
	}
}

// TestManualConcurrent checks under -race that Advance from many goroutines
// loses no step.
func TestManualConcurrent(t *testing.T) {
	m := clock.NewManual(0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				m.Advance(time.Nanosecond)
				_ = m.Now()
			}
		}()
	}
	wg.Wait()
	if got := m.Now(); got != 8000 {
		t.Fatalf("after 8000 concurrent 1ns steps Now() = %v, want 8µs", got)
	}
}

// BenchmarkClock compares the default clock with time.Now, which also reads
// the wall clock.
//
//	go test -run '^$' -bench Clock -count 10 ./clock/ | benchstat -col /clock -
func BenchmarkClock(b *testing.B) {
	racetest.Bench()
	b.Run("clock=system", func(b *testing.B) {
		c := clock.System()
		for i := 0; i < b.N; i++ {
			_ = c.Now()
		}
	})
	b.Run("clock=time.Now", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = time.Now()
		}
	})
}
