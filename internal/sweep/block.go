package sweep

import (
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
)

// Block is one key's states in a store that guards them with a lock
// (mutexbucket's bucket), for the policy
// Rules: window 0's state inline, so that a one-window key costs no more
// than before policies, and the others, for a key under several windows,
// in an array of their own. First is Fresh for a bucket not spent from
// yet and rules.Tombstone for one swept. Set a Block up with Init; the
// zero Block is invalid.
//
// Window 0's state is written only under the store's lock, but atomically,
// so that a store may read it without the lock (First): mutexbucket
// decides a request that the state it reads already denies without taking
// the lock. The other states and the log are read and written under the
// lock alone.
//
// A SlidingLog policy's block keeps its key's log in Rest too (see
// block_log.go), and its states are the log's summary.
type Block struct {
	Rules *rules.Rules
	first atomic.Uint64 // window 0's state: see First
	Rest  *Rest
}

// Rest is what a block of several states keeps out of line: the states
// after the first, and a SlidingLog policy's log.
type Rest struct {
	S   [keyrate.MaxLimits - 1]rules.State
	Log *rules.Log
}

// Init sets b up under rs in states s (Fresh if s is nil), before b is
// shared.
func (b *Block) Init(rs *rules.Rules, s []rules.State) {
	b.Rules = rs
	b.SetFirst(Fresh)
	if n := rs.Len(); n > 1 {
		b.Rest = &Rest{Log: rs.NewLog(s)}
	}
	if s != nil {
		b.Store(s)
	}
}

// First returns window 0's state, or Fresh or rules.Tombstone. It is one
// atomic load, safe without the lock: the state of some instant between
// the call and its return.
func (b *Block) First() rules.State { return rules.State(b.first.Load()) }

// SetFirst sets window 0's state to s (atomically: see First); the
// caller holds the lock.
func (b *Block) SetFirst(s rules.State) { b.first.Store(uint64(s)) }

// Load copies the block's states into s, one per window: a SlidingLog
// policy's log's summary as read now (rules.Rules.LogView).
func (b *Block) Load(s []rules.State) {
	if len(s) == 0 {
		return
	}
	if l := b.log(); l != nil {
		b.Rules.LogView(l, s)
		return
	}
	s[0] = b.First()
	if len(s) > 1 {
		copy(s[1:], b.Rest.S[:len(s)-1])
	}
}

// Store sets the block's states from s, one per window.
func (b *Block) Store(s []rules.State) {
	if len(s) == 0 {
		return
	}
	b.SetFirst(s[0])
	if len(s) > 1 {
		copy(b.Rest.S[:len(s)-1], s[1:])
	}
}

// Spend is the request on a block whose lock the caller holds, at reading
// t: it spends cost from every window of b if each holds it (or, with a
// wait above 0, reserves it: see rules.Rules.Reserve) (a block not
// spent from yet is read as the floor first, and keeps the floor if the
// spend is denied, so that a sweep can remove it), writes the states after
// the call into s, and returns the reading it was decided at and
// rules.Rules.Take's result. b must not be swept.
func (b *Block) Spend(t time.Duration, cost int, wait time.Duration, floor *Floor, s []rules.State) (time.Duration, int) {
	if l := b.log(); l != nil {
		return b.spendLog(l, t, cost, floor, s)
	}
	if b.First() == Fresh {
		t = floor.Start(b.Rules, t, s)
	} else {
		b.Load(s)
	}
	_, denied := b.Rules.Reserve(s, t, cost, wait)
	b.Store(s)
	return t, denied
}

// Cancel gives back the cost tokens of a reservation that left window 0
// in state end, with its slot at reading slot, if the slot has not come
// at reading t and b has not changed since (rules.Rules.Cancel), and
// reports whether it did; b's lock must be held, and t read under it. A
// block not spent from yet, or swept, gives nothing back.
func (b *Block) Cancel(end rules.State, t, slot time.Duration, cost int) bool {
	if b.First() >= Fresh {
		return false
	}
	var s [keyrate.MaxLimits]rules.State
	n := b.Rules.Len()
	b.Load(s[:n])
	if !b.Rules.Cancel(s[:n], end, t, slot, cost) {
		return false
	}
	b.Store(s[:n])
	return true
}

// Refund gives cost back to every window of b at reading t; b's lock must
// be held. A block not spent from yet, or swept, is left alone.
func (b *Block) Refund(t time.Duration, cost int) {
	if b.First() >= Fresh {
		return
	}
	var s [keyrate.MaxLimits]rules.State
	n := b.Rules.Len()
	if l := b.log(); l != nil {
		b.Rules.LogRefund(l, t, cost, s[:n])
		b.Store(s[:n])
		return
	}
	b.Load(s[:n])
	b.Rules.Refund(s[:n], t, cost)
	b.Store(s[:n])
}

// Full reports whether b is full at reading t (and so can be evicted),
// raising floor to the reading at which it became full if so; b's lock
// must be held. A block not spent from yet, or swept, is not full.
func (b *Block) Full(t time.Duration, floor *Floor) bool {
	if b.First() >= Fresh {
		return false
	}
	var s [keyrate.MaxLimits]rules.State
	n := b.Rules.Len()
	b.Load(s[:n])
	if !b.Rules.Full(s[:n], t) {
		return false
	}
	floor.Raise(b.Rules.Reading(s[:n]))
	return true
}
