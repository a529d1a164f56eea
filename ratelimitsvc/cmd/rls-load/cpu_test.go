package main

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// rusage returns this process's user and system CPU time by getrusage,
// the reference cpuTime is checked against.
func rusage(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUTime: over a busy loop of at least 300ms of CPU time by
// getrusage, cpuTime of this process grows by what getrusage says, to
// within its ticks; a process that does not exist reads as not there.
func TestCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	before, ok := cpuTime(os.Getpid())
	if !ok {
		t.Fatal("cpuTime(self) not read")
	}
	ru0 := rusage(t)
	for rusage(t)-ru0 < 300*time.Millisecond {
		for i := range 1_000_000 {
			sink += i
		}
	}
	spent := rusage(t) - ru0
	after, _ := cpuTime(os.Getpid())
	if d := after - before; d < spent-3*clockTick || d > spent+3*clockTick {
		t.Fatalf("cpuTime grew by %v over a loop that getrusage says took %v", d, spent)
	}
	if _, ok := cpuTime(1 << 30); ok {
		t.Fatal("cpuTime of a process that does not exist read as there")
	}
}

var sink int
