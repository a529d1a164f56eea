package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's utime and stime: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuTime returns the CPU time (user and system, all threads) that
// process pid has used, from /proc/<pid>/stat; 0 and false where there
// is no such file (not Linux, or the process is gone).
func cpuTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields that follow it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, false
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// cpuMeter reads the CPU time of a set of processes at the start and the
// end of a measurement's counted interval.
type cpuMeter struct {
	pids       []int
	start, end []time.Duration
	ok         bool
}

func (m *cpuMeter) read() ([]time.Duration, bool) {
	t := make([]time.Duration, len(m.pids))
	for i, pid := range m.pids {
		var ok bool
		if t[i], ok = cpuTime(pid); !ok {
			return nil, false
		}
	}
	return t, true
}

// begin and finish mark the counted interval.
func (m *cpuMeter) begin() { m.start, m.ok = m.read() }

func (m *cpuMeter) finish() {
	if !m.ok {
		return
	}
	m.end, m.ok = m.read()
}

// perRequest returns the CPU time process i used per request over the
// counted interval, or a dash where it could not be read.
func (m *cpuMeter) perRequest(i, requests int) string {
	if !m.ok || requests == 0 {
		return "—"
	}
	d := m.end[i] - m.start[i]
	return fmt.Sprintf("%.1fµs", float64(d.Microseconds())/float64(requests))
}
