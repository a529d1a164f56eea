package sweep

import (
	"time"

	"github.com/keyrate/keyrate/internal/rules"
)

// This file is the part of Block that keeps a SlidingLog policy's log:
// the log itself (rules.Log) hangs off the block's Rest, allocated with
// the block, and is read and written only under the block's lock; the
// block's states are the log's summary, rewritten after every change, so
// that everything that copies a block's states (a decision built after
// the lock is let go, a sweep's Full, a change of policy) reads it
// without the log.

// log returns the block's log, or nil for a policy that keeps none.
func (b *Block) log() *rules.Log {
	if b.Rest == nil {
		return nil
	}
	return b.Rest.Log
}

// spendLog is Spend for a block with log l: a block not spent from yet
// starts its log at the floor (rules.Rules.SeedLog), and keeps it there
// if the spend is denied, as Spend does.
func (b *Block) spendLog(l *rules.Log, t time.Duration, cost int, floor *Floor, s []rules.State) (time.Duration, int) {
	if b.First() == Fresh {
		t = floor.Start(b.Rules, t, s)
		b.Rules.SeedLog(l, s)
	}
	denied := b.Rules.LogSpend(l, t, cost, s)
	if denied < 0 || b.First() != Fresh {
		b.Store(s)
	}
	return t, denied
}
