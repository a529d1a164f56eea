package flatmap

import (
	"encoding/binary"

	"github.com/keyrate/keyrate/internal/rules"
)

// This file is the part of Map that keeps the logs of keys under a
// SlidingLog policy (rules.Rules.IsLog): a log is a heap object of its
// own (rules.Log, a ring as long as the limit's rate), so it cannot live
// in the arena. The map keeps its keys' logs in a side table, and a log
// key's record ends with the 4-byte index of its log there; its states
// are the log's summary, as in every store (see rules.Log). Only log keys
// cost the garbage collector a pointer each.

// logTable is a map's logs, and the indexes of its free entries.
type logTable struct {
	logs []*rules.Log
	free []uint32
}

// tailLen returns the bytes of a record after its key under rs: the
// states of windows 1 on, and a log's index.
func tailLen(rs *rules.Rules) int {
	n := 8 * (rs.Len() - 1)
	if rs.IsLog() {
		n += 4
	}
	return n
}

// addLog stores l in the log table and returns its index.
func (m *Map) addLog(l *rules.Log) uint32 {
	if m.logs == nil {
		m.logs = new(logTable)
	}
	t := m.logs
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		t.logs[i] = l
		return i
	}
	t.logs = append(t.logs, l)
	return uint32(len(t.logs) - 1)
}

// dropLog frees the log of the record that ref names, if it has one.
func (m *Map) dropLog(ref uint64) {
	if !m.rulesOf(ref).IsLog() {
		return
	}
	i := m.logAt(ref)
	m.logs.logs[i] = nil
	m.logs.free = append(m.logs.free, i)
}

// logAt returns the index of the log of the record that ref names, whose
// policy keeps one.
func (m *Map) logAt(ref uint64) uint32 {
	rs := m.rulesOf(ref)
	return binary.LittleEndian.Uint32(m.arena[m.restAt(ref)+8*(rs.Len()-1):])
}

// Log returns the log of the key in slot i, or nil if its policy keeps
// none.
func (m *Map) Log(i int) *rules.Log {
	ref := m.slots[i].ref
	if !m.rulesOf(ref).IsLog() {
		return nil
	}
	return m.logs.logs[m.logAt(ref)]
}
